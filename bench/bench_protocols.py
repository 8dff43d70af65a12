#!/usr/bin/env python
"""brain's Xaibo memory (``brain.shells.xaibo.BrainMemory``) against Xaibo's own ``VectorMemory``, same run.

    .venv/bin/python bench/bench_protocols.py [--n 2000] [--k 5] [--latency-queries 200]
                                              [--seed 6] [--out bench/PROTOCOLS_RESULTS.md]

Both sides get the same memories, the same operations in the same order and the same embedder
(brain's local MiniLM; Xaibo's side reaches it through ``brain.shells.xaibo.BrainEmbedder``):

- xaibo: ``xaibo.primitives.modules.memory.VectorMemory`` over Xaibo's ``NumpyVectorIndex`` (both
  persisting to a temp dir, as Xaibo's own modules do), chunked by ``BrainChunker`` (Xaibo's
  ``TokenChunker`` needs tiktoken, which is not installed; one chunker for both sides also means both
  index exactly the same windows: 200 MiniLM tokens, 40 overlap).
- brain: ``BrainMemory`` on a fresh embedded ``RagStore`` in a temp dir.

Workload: N memories (90% short facts, 10% long notes of ~5 chunks whose distinctive sentence
sits in the last chunk), each with attributes; then 10% are updated (a clearly different text and
one changed attribute, ``topic``) and another 10% deleted. Then:

(a) for each updated memory, a query matching its OLD text (a short fact verbatim; a long note's
    distinctive sentence): results in the top k that are stale — the old text, an id that no longer
    exists, or a memory whose score its current text cannot explain (the score is above the best
    cosine between the query and the memory's current text or any of its chunks, + 0.02);
(b) for each deleted memory, a query matching it: results pointing at deleted memories;
(c) after the update, the fraction of updated memories whose untouched attributes survived;
(d) ``search_memory`` p50/p95 at N (the sides take turns query by query) and ``store_memory``
    throughput (blocks of 100 memories, sides taking turns);
(e) one result per memory: duplicate memory ids within a result list, and result lists shorter
    than k although more than k memories are live (slots lost to stale or duplicate vectors);
plus, as a fairness check, hit@k for queries of untouched memories, and the vectors each side
still holds against what its live memories need.

The query cache of brain's embedder is off (``query_cache_size=0``), so both sides embed every
query. Prints one Markdown table and writes it, with machine info, to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from xaibo.primitives.modules.memory import NumpyVectorIndex, VectorMemory

from brain.app.core import open_store
from brain.config import Settings
from brain.shells.xaibo import BrainChunker, BrainEmbedder, BrainMemory

BLOCK = 100  # store_memory: the sides take turns every BLOCK memories
SLACK = 0.02  # a score this far above what the current text explains came from a stale vector

# ---- data -------------------------------------------------------------------------------------------
NAMES = """Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Karl Laura Mallory Niaj Olivia Peggy Quentin
Rupert Sybil Trent Uma Victor Wendy Xavier Yvonne Zach Amara Bruno Chiara Dmitri Esther Farid Greta Hiro
Ines Jonas Kenji Leila Marco Nadia Oskar Priya Rafael Sofia Tariq Ulla Vera Wei Yusuf Zora""".split()
CITIES = """Lisbon Oslo Nairobi Lima Kyoto Dublin Tallinn Porto Quito Hanoi Bergen Krakow Seville Tunis
Valparaiso Ghent Bilbao Lyon Zagreb Riga Cusco Accra Malmo Graz Leeds Turin Sapporo Perth Halifax Reno""".split()
JOBS = ["nurse", "welder", "pilot", "baker", "librarian", "architect", "dentist", "translator", "plumber",
        "florist", "geologist", "barista", "locksmith", "tax adviser", "zookeeper", "carpenter", "surveyor",
        "midwife", "sommelier", "beekeeper"]
FOODS = ["Thai curry", "ramen", "falafel", "paella", "pierogi", "sushi", "goulash", "tacos", "risotto",
         "pho", "moussaka", "bibimbap", "lasagne", "ceviche", "dumplings", "couscous"]
HOBBIES = ["bouldering", "chess", "pottery", "birdwatching", "salsa dancing", "sailing", "knitting",
           "astronomy", "woodturning", "fencing", "origami", "trail running", "beekeeping", "kayaking"]
PETS = ["a grey parrot", "two cats", "a beagle", "a tortoise", "a ferret", "goldfish", "a husky",
        "a rabbit", "a gecko", "a border collie"]
INSTRUMENTS = ["cello", "banjo", "oboe", "drums", "harp", "trumpet", "ukulele", "accordion", "violin"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
ALLERGIES = ["peanuts", "shellfish", "penicillin", "cat hair", "pollen", "gluten", "latex", "bee stings"]
TOPICS = ["food", "travel", "work", "health", "family", "hobby", "money", "home"]
SOURCES = ["chat", "email", "calendar", "voice note"]

FACTS = [
    ("food", "{name} always orders {food} when eating out in {city}"),
    ("travel", "{name}'s flight to {city} leaves on {day} morning"),
    ("work", "{name} works as a {job} in {city}"),
    ("hobby", "{name} spends weekends {hobby} near {city}"),
    ("home", "{name} lives in {city} with {pet}"),
    ("hobby", "{name} plays the {instrument} in a band that rehearses every {day}"),
    ("health", "{name} is allergic to {allergy} and carries medication"),
    ("family", "{name}'s sister is a {job} who just moved to {city}"),
    ("money", "{name} owes the {job} from {city} {amount} euros"),
    ("health", "{name} has a physiotherapy appointment every {day} in {city}"),
]
UPDATES = [  # the new text of an updated memory: a different subject altogether
    ("money", "{name} cancelled every subscription and now saves {amount} euros a month for a boat"),
    ("work", "{name} quit the old job and opened a small {food} stall at the {city} night market"),
    ("home", "{name} sold the flat and lives on a narrowboat moored outside {city}"),
    ("health", "{name} broke a wrist on {day} and cannot type or drive for six weeks"),
    ("family", "{name} became a grandparent on {day}; the baby is named after a {instrument} player"),
]
LOG_LINES = [
    "{name} reviewed the {project} budget with the team in {city} and trimmed the travel costs.",
    "On {day} the {project} prototype failed its load test and had to be rebuilt from the base plate.",
    "The supplier in {city} delayed the {project} parts again, so {name} drafted a backup order.",
    "A long discussion about naming: the team settled on keeping {project} as the working title.",
    "{name} wrote down that the documentation for {project} was behind by roughly two weeks.",
    "The {project} steering group asked for a weekly summary every {day} before lunch.",
    "Testing of {project} in the {city} lab showed the sensors drifting after about four hours.",
    "{name} interviewed three candidates for the {project} role of {job} and liked the second one.",
]
PROJECTS = ["Heron", "Basalt", "Juniper", "Kestrel", "Marigold", "Obsidian", "Pelican", "Quartz", "Sorrel",
            "Tamarind", "Umber", "Vireo", "Wren", "Yarrow", "Zephyr", "Alder", "Bramble", "Cobalt"]
SECRET = "The spare key to {name}'s {project} storage unit in {city} is hidden under the blue {object}."
SECRET_QUERY = "where is the spare key to {name}'s {project} storage unit in {city} hidden?"
OBJECTS = ["flowerpot", "doormat", "watering can", "bench", "toolbox", "lantern", "bucket", "crate"]


@dataclass
class Item:
    """One memory of the workload: its text, attributes and a query that should find it."""

    key: int
    text: str
    attributes: dict[str, Any]
    query: str
    long: bool
    new_text: str | None = None
    new_topic: str | None = None
    new_query: str | None = None
    updated: bool = False
    deleted: bool = False

    @property
    def current(self) -> str:
        return self.new_text if self.updated else self.text


def _slots(rng: random.Random) -> dict[str, Any]:
    return {
        "name": rng.choice(NAMES), "city": rng.choice(CITIES), "job": rng.choice(JOBS), "food": rng.choice(FOODS),
        "hobby": rng.choice(HOBBIES), "pet": rng.choice(PETS), "instrument": rng.choice(INSTRUMENTS),
        "day": rng.choice(DAYS), "allergy": rng.choice(ALLERGIES), "amount": rng.randrange(20, 2000, 5),
        "project": rng.choice(PROJECTS), "object": rng.choice(OBJECTS),
    }


def _long_note(rng: random.Random, slots: dict[str, Any]) -> str:
    """~900 MiniLM tokens of project log (5 chunks of 200/40), the distinctive sentence at the very end."""
    lines = [f"Project log of {slots['name']} for {slots['project']}, {slots['city']}."]
    for entry in range(1, 41):
        lines.append(f"Entry {entry}: " + rng.choice(LOG_LINES).format(**{**slots, **_slots(rng), "name": slots["name"],
                                                                       "project": slots["project"]}))
    lines.append(SECRET.format(**slots))
    return " ".join(lines)


def make_workload(n: int, seed: int) -> list[Item]:
    rng = random.Random(seed)
    items: list[Item] = []
    texts: set[str] = set()
    while len(items) < n:
        slots = _slots(rng)
        long = rng.random() < 0.10
        if long:
            secret = SECRET.format(**slots)
            if secret in texts:
                continue
            texts.add(secret)
            text, query, topic = _long_note(rng, slots), SECRET_QUERY.format(**slots), "work"
        else:
            topic, template = rng.choice(FACTS)
            text = template.format(**slots)
            if text in texts:
                continue
            texts.add(text)
            query = text
        attributes = {
            "person": slots["name"], "topic": topic, "source": rng.choice(SOURCES),
            "importance": rng.randint(1, 5), "tags": [topic, slots["city"].lower()],
        }
        items.append(Item(len(items), text, attributes, query, long))
    order = list(range(n))
    rng.shuffle(order)
    share = max(1, n // 10)
    for i in order[:share]:  # updated: a different subject (long notes stay long: new chunks, old ones must go)
        item = items[i]
        while True:
            slots = {**_slots(rng), "name": item.attributes["person"]}
            if item.long:
                new_text, new_query = _long_note(rng, slots), SECRET_QUERY.format(**slots)
                key = SECRET.format(**slots)
            else:
                topic, template = rng.choice(UPDATES)
                new_text = key = new_query = template.format(**slots)
            if key not in texts:
                texts.add(key)
                break
        item.new_text, item.new_query = new_text, new_query
        item.new_topic = rng.choice([t for t in TOPICS if t != item.attributes["topic"]])
    for i in order[share:2 * share]:
        items[i].deleted = True
    return items


# ---- the two memories ---------------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    memory: Any
    ids: dict[int, str] = field(default_factory=dict)  # item key -> memory id
    store_seconds: float = 0.0
    update_seconds: float = 0.0
    delete_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def key_of(self) -> dict[str, int]:
        return {mid: key for key, mid in self.ids.items()}


class Truth:
    """What each memory legitimately contains now, and the best score its current text can earn."""

    def __init__(self, items: list[Item], embedder, chunker):
        self.items = items
        self.embedder = embedder
        self.chunker = chunker
        self._vectors: dict[str, np.ndarray] = {}

    def vectors(self, text: str) -> np.ndarray:
        """The whole text and each chunk of it: every vector either side may hold for this text."""
        if text not in self._vectors:
            pieces = [text, *self.chunker.chunk(text)]
            self._vectors[text] = self.embedder.embed_documents(pieces)
        return self._vectors[text]

    def best_score(self, query_vector: np.ndarray, text: str) -> float:
        return float(np.max(self.vectors(text) @ query_vector))


def stale_results(results, side: Side, truth: Truth, query_vector: np.ndarray) -> dict[str, int]:
    """Classify one result list: deleted ids, unknown ids, old text, scores the current text cannot explain."""
    key_of = side.key_of()
    out = {"deleted": 0, "unknown": 0, "old_text": 0, "stale_score": 0}
    for r in results:
        key = key_of.get(r.memory_id)
        if key is None:
            out["unknown"] += 1
            continue
        item = truth.items[key]
        if item.deleted:
            out["deleted"] += 1
        elif r.content != item.current:
            out["old_text"] += 1
        elif r.similarity_score > truth.best_score(query_vector, item.current) + SLACK:
            out["stale_score"] += 1
    return out


async def run_benchmark(items: list[Item], sides: list[Side], truth: Truth, k: int, latency_queries: int,
                        seed: int, log) -> None:
    rng = random.Random(seed + 1)
    # -- store: blocks of BLOCK, the sides taking turns (who goes first alternates) --
    for b, start in enumerate(range(0, len(items), BLOCK)):
        block = items[start:start + BLOCK]
        for side in (sides if b % 2 == 0 else sides[::-1]):
            t0 = time.perf_counter()
            for item in block:
                side.ids[item.key] = await side.memory.store_memory(item.text, dict(item.attributes))
            side.store_seconds += time.perf_counter() - t0
        if (b + 1) % 5 == 0:
            log(f"  stored {start + len(block)} / {len(items)}")
    for side in sides:
        assert len(set(side.ids.values())) == len(items), f"{side.name}: ids are not unique"

    # -- update 10% (new text + changed topic; the other attributes are not given), delete 10% --
    updated = [it for it in items if it.new_text is not None]
    deleted = [it for it in items if it.deleted]
    for side in sides:
        side.stats["update_ok"] = 0
        side.stats["delete_ok"] = 0
    for i, item in enumerate(updated):
        for side in (sides if i % 2 == 0 else sides[::-1]):
            t0 = time.perf_counter()
            ok = await side.memory.update_memory(side.ids[item.key], item.new_text, {"topic": item.new_topic})
            side.update_seconds += time.perf_counter() - t0
            side.stats["update_ok"] += bool(ok)
        item.updated = True
    for i, item in enumerate(deleted):
        for side in (sides if i % 2 == 0 else sides[::-1]):
            t0 = time.perf_counter()
            ok = await side.memory.delete_memory(side.ids[item.key])
            side.delete_seconds += time.perf_counter() - t0
            side.stats["delete_ok"] += bool(ok)
    log(f"  updated {len(updated)}, deleted {len(deleted)}")

    live = sum(1 for it in items if not it.deleted)

    def tally(side: Side, name: str, results, query_vector) -> dict[str, int]:
        counts = stale_results(results, side, truth, query_vector)
        agg = side.stats.setdefault(name, {"queries": 0, "results": 0, "dup": 0, "short": 0, "bad_queries": 0,
                                           "deleted": 0, "unknown": 0, "old_text": 0, "stale_score": 0,
                                           "hit": 0, "target_stale": 0})
        ids = [r.memory_id for r in results]
        agg["queries"] += 1
        agg["results"] += len(results)
        agg["dup"] += len(ids) - len(set(ids))
        agg["short"] += len(set(ids)) < k <= live
        for key, value in counts.items():
            agg[key] += value
        agg["bad_queries"] += any(counts.values())
        return counts

    # -- (a) old text of updated memories, (b) deleted memories, (f) untouched memories --
    untouched = [it for it in items if not it.deleted and not it.updated]
    sample = rng.sample(untouched, min(latency_queries, len(untouched)))
    phases = [("updated", updated, lambda it: it.query), ("deleted", deleted, lambda it: it.query),
              ("updated_new", updated, lambda it: it.new_query)]
    for phase, group, query_of in phases:
        for i, item in enumerate(group):
            query = query_of(item)
            qv = truth.embedder.embed_query(query)
            for side in (sides if i % 2 == 0 else sides[::-1]):
                results = await side.memory.search_memory(query, k=k)
                tally(side, phase, results, qv)
                mine = [r for r in results if r.memory_id == side.ids[item.key]]
                agg = side.stats[phase]
                agg["hit"] += bool(mine)
                if phase == "updated" and mine:
                    # the updated memory itself came back for its old text: stale unless its new text explains it
                    agg["target_stale"] += mine[0].similarity_score > truth.best_score(qv, item.current) + SLACK
        log(f"  queries: {phase} done")

    # -- (d) latency, with (f) hit@k of untouched memories: the sides take turns query by query --
    for i, item in enumerate(sample):
        qv = truth.embedder.embed_query(item.query)
        for side in (sides if i % 2 == 0 else sides[::-1]):
            t0 = time.perf_counter()
            results = await side.memory.search_memory(item.query, k=k)
            side.latencies.append(time.perf_counter() - t0)
            tally(side, "untouched", results, qv)
            side.stats["untouched"]["hit"] += any(r.memory_id == side.ids[item.key] for r in results)
    log("  latency queries done")

    # -- (c) attributes after update --
    for side in sides:
        kept = changed = 0
        for item in updated:
            got = await side.memory.get_memory(side.ids[item.key])
            attrs = (got or {}).get("attributes") or {}
            untouched_attrs = {key: v for key, v in item.attributes.items() if key != "topic"}
            kept += all(attrs.get(key) == v for key, v in untouched_attrs.items())
            changed += attrs.get("topic") == item.new_topic
        side.stats["attrs_kept"] = kept
        side.stats["topic_changed"] = changed
        side.stats["listed"] = len(await side.memory.list_memories())


# ---- report -----------------------------------------------------------------------------------------
def fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def ratio(a: float, b: float) -> str:
    if b == 0:
        return "—" if a == 0 else "∞"
    return f"{a / b:.2f}"


def build_table(items: list[Item], brain: Side, xaibo: Side, k: int, footprint: dict[str, tuple[int, int]]) -> str:
    n_upd = sum(it.updated for it in items)
    n_del = sum(it.deleted for it in items)
    rows: list[tuple[str, str, str, str]] = []

    def row(metric: str, b: float, x: float, unit: str = "", digits: int = 0, show_ratio: bool = True) -> None:
        rows.append((metric, fmt(b, digits) + unit, fmt(x, digits) + unit, ratio(b, x) if show_ratio else ""))

    for side in (brain, xaibo):
        side.stats["store_rate"] = len(items) / side.store_seconds
    row("store_memory throughput (memories/s)", brain.stats["store_rate"], xaibo.stats["store_rate"], digits=1)
    row("update_memory mean (ms/op)", 1000 * brain.update_seconds / n_upd, 1000 * xaibo.update_seconds / n_upd, digits=1)
    row("delete_memory mean (ms/op)", 1000 * brain.delete_seconds / n_del, 1000 * xaibo.delete_seconds / n_del, digits=1)
    for side in (brain, xaibo):
        lat = sorted(side.latencies)
        side.stats["p50"] = 1000 * statistics.median(lat)
        side.stats["p95"] = 1000 * lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
    row(f"search_memory p50, k={k} (ms)", brain.stats["p50"], xaibo.stats["p50"], digits=1)
    row(f"search_memory p95, k={k} (ms)", brain.stats["p95"], xaibo.stats["p95"], digits=1)

    a_b, a_x = brain.stats["updated"], xaibo.stats["updated"]
    rows.append((f"(a) old-text queries for {n_upd} updated memories: the updated memory returned by its old text",
                 f"{a_b['target_stale']} / {n_upd}", f"{a_x['target_stale']} / {n_upd}", ""))
    for label, key in (("stale results in top-k (score its current text cannot explain)", "stale_score"),
                       ("results carrying the old text", "old_text"),
                       ("results with an id that no longer exists", "deleted"),
                       ("queries with at least one stale result", "bad_queries")):
        rows.append((f"(a) {label}", f"{a_b[key]} / {a_b['results']}" if key != "bad_queries" else f"{a_b[key]} / {n_upd}",
                     f"{a_x[key]} / {a_x['results']}" if key != "bad_queries" else f"{a_x[key]} / {n_upd}", ""))
    n_b, n_x = brain.stats["updated_new"], xaibo.stats["updated_new"]
    rows.append(("(a') updated memory found by a query for its NEW text (hit@k)",
                 f"{n_b['hit']} / {n_upd}", f"{n_x['hit']} / {n_upd}", ratio(n_b["hit"], n_x["hit"])))
    d_b, d_x = brain.stats["deleted"], xaibo.stats["deleted"]
    rows.append((f"(b) queries for {n_del} deleted memories: results pointing at a deleted memory",
                 f"{d_b['deleted']} / {d_b['results']}", f"{d_x['deleted']} / {d_x['results']}", ""))
    rows.append(("(b) results returned per query (of k)", fmt(d_b["results"] / n_del, 2), fmt(d_x["results"] / n_del, 2),
                 ratio(d_b["results"], d_x["results"])))
    rows.append(("(c) updated memories whose untouched attributes survived",
                 f"{brain.stats['attrs_kept']} / {n_upd}", f"{xaibo.stats['attrs_kept']} / {n_upd}", ""))
    rows.append(("(c) updated memories showing the changed attribute",
                 f"{brain.stats['topic_changed']} / {n_upd}", f"{xaibo.stats['topic_changed']} / {n_upd}", ""))
    phases = ("updated", "deleted", "updated_new", "untouched")
    q_b = sum(brain.stats[p]["queries"] for p in phases)
    dup_b = sum(brain.stats[p]["dup"] for p in phases)
    dup_x = sum(xaibo.stats[p]["dup"] for p in phases)
    short_b = sum(brain.stats[p]["short"] for p in phases)
    short_x = sum(xaibo.stats[p]["short"] for p in phases)
    rows.append((f"(e) duplicate memory ids within a top-k list ({q_b} queries)", str(dup_b), str(dup_x), ""))
    rows.append((f"(e) top-k lists with fewer than k memories ({q_b} queries, {sum(not i.deleted for i in items)} live)",
                 str(short_b), str(short_x), ""))
    u_b, u_x = brain.stats["untouched"], xaibo.stats["untouched"]
    rows.append((f"(f) untouched memories found by their query (hit@k, {u_b['queries']} queries)",
                 f"{u_b['hit']} / {u_b['queries']}", f"{u_x['hit']} / {u_x['queries']}", ratio(u_b["hit"], u_x["hit"])))
    fb, fx = footprint["brain"], footprint["xaibo"]
    rows.append(("vectors held after the updates and deletes (live memories need)",
                 f"{fb[0]:,} ({fb[1]:,})", f"{fx[0]:,} ({fx[1]:,})", ratio(fb[0], fx[0])))
    rows.append(("list_memories() count (live memories)", f"{brain.stats['listed']:,} ({fb[2]:,})",
                 f"{xaibo.stats['listed']:,} ({fx[2]:,})", ""))

    lines = ["| metric | brain | xaibo | ratio (brain / xaibo) |", "|---|---|---|---|"]
    lines += [f"| {m} | {b} | {x} | {r} |" for m, b, x, r in rows]
    return "\n".join(lines)


def machine_info() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(dist: str) -> str:
        try:
            return importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            return "?"

    return (f"{os.cpu_count()} cores ({cpu}); Python {platform.python_version()}, xaibo {version('xaibo')}, "
            f"chromadb {version('chromadb')}, numpy {np.__version__}, onnxruntime {version('onnxruntime')}")


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="memories to store (default 2000)")
    parser.add_argument("--k", type=int, default=5, help="top-k of every search (default 5)")
    parser.add_argument("--latency-queries", type=int, default=200, help="queries for the latency and hit@k check")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "PROTOCOLS_RESULTS.md")
    args = parser.parse_args()
    if args.n < 20:
        parser.error("--n must be at least 20 (10% are updated and 10% deleted)")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load_start = load()
    started = datetime.now(UTC)
    items = make_workload(args.n, args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="bench-protocols-"))
    try:
        settings = Settings(data_dir=tmp / "brain", query_cache_size=0)
        with open_store(settings) as store:
            chunker = BrainChunker(settings=settings)
            brain = Side("brain", BrainMemory(store=store))
            xaibo = Side("xaibo", VectorMemory(
                chunker=chunker,
                embedder=BrainEmbedder(embedder=store.embedder),
                vector_index=NumpyVectorIndex({"storage_dir": str(tmp / "xaibo" / "index")}),
                config={"memory_file_path": str(tmp / "xaibo" / "memories.pkl")},
            ))
            truth = Truth(items, store.embedder, chunker.chunker)
            n_long = sum(it.long for it in items)
            chunks = [len(chunker.chunker.chunk(it.text)) for it in items if it.long]
            log(f"N={args.n}: {args.n - n_long} short facts, {n_long} long notes "
                f"({min(chunks)}-{max(chunks)} chunks); load {load_start}")
            t0 = time.perf_counter()
            asyncio.run(run_benchmark(items, [brain, xaibo], truth, args.k, args.latency_queries, args.seed, log))
            elapsed = time.perf_counter() - t0

            live = [it for it in items if not it.deleted]
            needed = sum(len(chunker.chunker.chunk(it.current)) for it in live)
            footprint = {
                "brain": (store.count(type="memory"), needed, len(live)),
                "xaibo": (len(xaibo.memory.vector_index.attributes), needed, len(live)),
            }
            table = build_table(items, brain, xaibo, args.k, footprint)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    n_long = sum(it.long for it in items)
    header = [
        "# Xaibo memory protocols: brain's BrainMemory vs Xaibo's own VectorMemory",
        "",
        (f"- machine: {machine_info()}; load average {load_start} at start, {load()} at the end. "
         "**The 2 cores were shared with other helpers' test and benchmark runs**: absolute times are noisy; "
         "the sides take turns (blocks of 100 stores, query by query) so the ratios see the same load."),
        (f"- run: {started:%Y-%m-%d %H:%M} UTC, {elapsed:.0f} s; N = {args.n:,} memories ({args.n - n_long:,} short "
         f"facts, {n_long} long notes of ~5 chunks), 10% updated, 10% deleted, k = {args.k}, seed {args.seed}."),
        ("- both sides: brain's local MiniLM (384-d) as the embedder, brain's token-window chunker (200/40 MiniLM "
         "tokens). xaibo = `VectorMemory` + `NumpyVectorIndex` (Xaibo 0.3's modules, files in a temp dir); "
         "brain = `BrainMemory` on a fresh embedded `RagStore`. Query cache off."),
        "- command: `.venv/bin/python bench/bench_protocols.py" + (f" --n {args.n}" if args.n != 2000 else "") + "`",
        "",
        "",
    ]
    print(table)
    args.out.write_text("\n".join(header) + table + "\n\n" + notes(items, brain, xaibo, args.k, footprint))
    log(f"wrote {args.out}")


def notes(items: list[Item], brain: Side, xaibo: Side, k: int, footprint: dict[str, tuple[int, int, int]]) -> str:
    """The "what this shows" paragraphs, every figure taken from this run."""
    n_upd = sum(it.updated for it in items)
    a_b, a_x = brain.stats["updated"], xaibo.stats["updated"]
    d_b, d_x = brain.stats["deleted"], xaibo.stats["deleted"]
    u_b, u_x = brain.stats["untouched"], xaibo.stats["untouched"]
    n_b, n_x = brain.stats["updated_new"], xaibo.stats["updated_new"]
    fx = footprint["xaibo"]
    store_ratio = brain.stats["store_rate"] / xaibo.stats["store_rate"]
    lat_ratio = brain.stats["p50"] / xaibo.stats["p50"]
    n_del = sum(it.deleted for it in items)
    if store_ratio < 1:
        store_sentence = (f"Xaibo stores faster (brain at {store_ratio:.2f}x its throughput): a Xaibo store is a "
                          "pickle dump plus one `.npy` file per chunk, while brain validates the attributes, embeds "
                          "the text and its chunks in one batch, and commits them to Chroma and its in-process index.")
    else:
        store_sentence = (f"brain stores at {store_ratio:.2f}x Xaibo's throughput: Xaibo embeds chunk by chunk and "
                          "re-pickles its whole memory dict and attribute list on every store, which grows with N.")
    return f"""## What this shows

- **Stale vectors after an update.** Xaibo's `VectorMemory.update_memory` deletes the memory from its
  dict and stores new vectors under the same id, but `NumpyVectorIndex` has no delete, so the old
  text's vectors stay in the index still pointing at that id. A query for the old text then returns
  the updated memory — {a_x['target_stale']} of {n_upd} times here — showing its *new* content with the
  *old* text's score. In all, {a_x['stale_score']} of the {a_x['results']} results Xaibo returned to those
  queries carried a score that the memory's current text cannot produce. Xaibo never shows the old text itself ({a_x['old_text']} results):
  the staleness is a wrong match, not a wrong string. brain: {a_b['target_stale']} and {a_b['stale_score']}
  (the update writes the new chunks, switches the head's revision and deletes the old chunks).
- **Deletes.** Xaibo behaves well on what it returns: {d_x['deleted']} of its results pointed at a deleted memory,
  because `search_memory` drops vector hits whose id is no longer in its dict. Its delete is cheap
  ({1000 * xaibo.delete_seconds / max(1, n_del):.1f} ms against brain's {1000 * brain.delete_seconds / max(1, n_del):.1f} ms) because it never
  touches the index — the deleted memory's vectors stay,
  keep costing search time and take slots of the top k: a query matching a deleted memory got
  {d_x['results'] / max(1, d_x['queries']):.2f} results of {k} from Xaibo and {d_b['results'] / max(1, d_b['queries']):.2f} from brain
  (brain returned {d_b['deleted']} deleted ids).
- **Attributes on update.** Xaibo's `update_memory` reads the old attributes *after* deleting the memory,
  so it always merges into an empty dict: the untouched attributes survived in {xaibo.stats['attrs_kept']} of
  {n_upd} updated memories (the changed one, `topic`, is there: {xaibo.stats['topic_changed']}). brain keeps them:
  {brain.stats['attrs_kept']} of {n_upd} (a merge-patch over the stored attributes).
- **One result per memory.** Neither side returned a memory twice in one list (Xaibo de-duplicates by
  memory id too). But Xaibo asks its index for k vectors and then drops duplicates, stale and deleted
  hits, so {sum(xaibo.stats[p]['short'] for p in ('updated', 'deleted', 'updated_new', 'untouched'))} of its lists had fewer than {k} memories
  (long notes own several of the top vectors); brain widens its fetch until it has k memories
  ({sum(brain.stats[p]['short'] for p in ('updated', 'deleted', 'updated_new', 'untouched'))} short lists).
- **Where Xaibo is fine.** Fresh memories are found equally well: hit@{k} for untouched memories
  {u_x['hit']}/{u_x['queries']} (Xaibo) vs {u_b['hit']}/{u_b['queries']} (brain), and an updated memory is found by its
  new text {n_x['hit']}/{n_upd} vs {n_b['hit']}/{n_upd} — same embedder, same chunks.
- **Speed.** {store_sentence} Xaibo's search reads every vector file from disk on each query, so its
  cost grows with everything ever stored, stale and deleted vectors included ({fx[0]:,} vectors held for
  {fx[1]:,} live chunks here); brain ranks in process over its cached matrix: search p50 {lat_ratio:.2f}x Xaibo's.
"""

if __name__ == "__main__":
    main()
