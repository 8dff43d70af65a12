#!/usr/bin/env python
"""Does the right memory reach the prompt when the user writes in another language than the memory?

    .venv/bin/python bench/bench_multilingual.py [--out bench/MULTILINGUAL_RESULTS.md]

The default set is ``tests/fixtures/multilingual_people.json`` (our own text, written before any figure was
measured on it): twenty people, two for each of ten home languages (German, Spanish, French, Portuguese,
Italian, Japanese, Chinese, Russian, Korean, Arabic), each with three English memories and four in their
home language, one of them a critical fact (importance 5: an allergy, a condition, a medication). Four
memories per person are targets with three questions each, phrased as the person would ask them, in other
languages than the memory's: an English memory is asked in the home language and two others; a
home-language memory in English twice and once in a third language. Every target also has one question in
its own language (the control), and four unrelated messages per language (general knowledge, 14 languages)
concern nobody's memories. ``--data tests/fixtures/multilingual_memories.json`` reads the first, smaller set
(fourteen people, English memories asked in ten languages and the reverse); every choice of the rules below
has seen all of it.

For each embedder (:data:`EMBEDDERS`, one run, the same data) the memories are stored, each scoped to its
person, in a fresh embedded store in a temporary directory, and every message goes through
``ChatMemory.build_context(None, message, entity=<person>)`` with brain's default settings. Read from the
memory section (``ctx.memory``, the relevance-ranked memories; the always-shown facts, ``ctx.core``, are
counted apart since they show an important memory whatever the message):

- found: the share of questions whose target reached the model where it belongs: the memory section, or for
  a critical fact the always-shown facts, which exist to show such a fact whatever the message (goal
  :data:`GOAL` on the held-out people, in every direction: en->xx, xx->en, xx->yy);
- target shown: the share of questions whose target memory is in the memory section;
- wrong shown: the mean number of other memories in that section (the person's own: another person's
  cannot be read for them, which is counted too and must be 0);
- asked for someone else: the same question asked for the next person of the set, the share of empty
  memory sections (nothing of theirs answers it);
- unrelated empty: every unrelated message asked for every person, the share of empty memory sections.

Each miss is explained from the same store by the memory index without the gate: the target's similarity,
its relevance (similarity + the weighted lexical match), the floor it had to reach, and which part of the
gate (floor, margin, top k) kept it out.

The set is split by person (``split`` in the file). Choices may look at the ``tuning`` people only
(``--people tuning``); the report gives the ``held_out`` people apart, and the goal is read on them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

INVOKED_FROM = Path.cwd()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.rules.memories import search_scopes  # noqa: E402
from brain.store.indexes import memory_index  # noqa: E402
from brain.store.memory_query import MemoryQuery  # noqa: E402

DATA = ROOT / "tests" / "fixtures" / "multilingual_people.json"
EMBEDDERS = ("local/minilm-l6-v2", "local/multilingual-e5-small", "local/use-multilingual-v3")
SHORT = {
    "local/minilm-l6-v2": "MiniLM",
    "local/multilingual-e5-small": "e5-small",
    "local/use-multilingual-v3": "USE-m3",
}
#: the share of questions whose target must be found, in every direction, on the held-out people
GOAL = 0.80
#: when every memory was learned (the set's memories carry no date of their own)
LEARNED = "2026-11-20T10:00:00+00:00"
SPLITS = ("tuning", "held_out")


@dataclass
class Question:
    entity: str
    split: str
    text: str
    language: str
    target: str  # the target memory's text
    memory_language: str
    control: bool = False
    critical: bool = False

    @property
    def direction(self) -> str:
        if self.control:
            return "same"
        if self.memory_language == "en":
            return "en->xx"
        return "xx->en" if self.language == "en" else "xx->yy"

    @property
    def side(self) -> str:
        """The language a per-language row files it under: the memory's for xx->en, else the question's."""
        return self.memory_language if self.direction == "xx->en" else self.language


@dataclass
class Outcome:
    """What one message did: for a question, its target; for an unrelated message, only the empty section."""

    split: str
    direction: str
    language: str
    critical: bool = False
    shown: bool = False
    in_prompt: bool = False  # in the memory section or among the always-shown facts
    wrong: int = 0
    # the memory section was empty: for a question, asked for the next person; for an unrelated message, for its own
    empty: bool = False
    leak: bool = False  # a prompt held a memory of someone else than the person asked for (must never)
    similarity: float = float("nan")  # the target's, and its relevance and rank without the gate
    relevance: float = float("nan")
    rank: int | None = None
    kept_out_by: str = ""

    @property
    def found(self) -> bool:
        """The target reached the model where it belongs: the memory section, or for a critical fact the
        always-shown facts, which exist so that such a fact is in every prompt whatever the message."""
        return self.shown or (self.critical and self.in_prompt)


def load(path: Path = DATA) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def questions_of(data: dict[str, Any], control: bool = False) -> list[Question]:
    """The cross-language questions, and with ``control`` the same-language ones as well."""
    out = []
    for person in data["people"]:
        for memory in person["memories"]:
            asked = [(q, False) for q in memory.get("questions", ())]
            asked += [(q, True) for q in memory.get("control", ())] if control else []
            for q, is_control in asked:
                out.append(
                    Question(
                        person["entity"],
                        person["split"],
                        q["text"],
                        q["language"],
                        memory["text"],
                        memory["language"],
                        is_control,
                        bool(memory.get("critical")),
                    )
                )
    return out


def ratio(n: int, d: int) -> str:
    return f"{n / d:.2f} ({n}/{d})" if d else "–"


# ---- one embedder -----------------------------------------------------------------------------
def measure(embedder: str, data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Store the set with ``embedder`` and ask every message through ``build_context``."""
    people = data["people"]
    entities = [p["entity"] for p in people]
    next_of = {e: entities[(i + 1) % len(entities)] for i, e in enumerate(entities)}
    split_of = {p["entity"]: p["split"] for p in people}
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="brain-multilingual-") as tmp:
        settings = Settings(
            data_dir=Path(tmp), mirror_enabled=False, summary_every_n=1000, embedder=embedder, **overrides
        )
        with (
            open_store(settings) as store,
            ChatMemory(store, start_worker=False, summarizer=ExtractiveSummarizer()) as chat,
        ):
            t0 = time.perf_counter()
            ids: dict[str, dict[str, str]] = {}  # entity -> memory text -> id
            for person in people:
                ids[person["entity"]] = {
                    m["text"]: chat.remember(
                        m["text"],
                        importance=m["importance"],
                        entity=person["entity"],
                        timestamp=LEARNED,
                        source="import",
                    )
                    for m in person["memories"]
                }
            store_s = time.perf_counter() - t0
            owner = {i: e for e, by_text in ids.items() for i in by_text.values()}
            weights = store.retrieval.memory_weights()
            cal = store.retrieval.calibration()
            index = memory_index(store)
            t0 = time.perf_counter()
            contexts = 0

            def sections(message: str, entity: str) -> tuple[list[str], list[str], bool]:
                """The memory section's ids, the always-shown facts' ids, and whether either held someone else's."""
                nonlocal contexts
                contexts += 1
                ctx = chat.build_context(None, message, entity=entity)
                memory, core = [i.id for i in ctx.memory], [i.id for i in ctx.core]
                return memory, core, any(owner.get(i) != entity for i in memory + core)

            def diagnose(q: Question, out: Outcome) -> None:
                """The target as the index ranks it without the gate, and which part of the gate dropped it."""
                vector = store.embedder.embed_query(q.text)  # cached: build_context embedded it already
                target = ids[q.entity][q.target]
                scopes, now = search_scopes(q.entity), time.time()

                def ranked(w: Any) -> list[Any]:
                    return list(index.search(MemoryQuery(vector, 100, w, now, scopes, query_text=q.text)))

                free = ranked(replace(weights, floor=None, margin=None))
                order = [h.id for h in free]
                hit = next((h for h in free if h.id == target), None)
                if hit is not None:
                    out.similarity, out.relevance = hit.similarity, hit.similarity + hit.lexical_part
                    out.rank = order.index(target) + 1
                if not out.shown:
                    floored = {h.id for h in ranked(replace(weights, margin=None))}
                    gated = {h.id for h in ranked(weights)}
                    out.kept_out_by = "top k" if target in gated else "margin" if target in floored else "floor"

            for q in questions_of(data, control=True):
                memory, core, leak = sections(q.text, q.entity)
                target = ids[q.entity][q.target]
                other_memory, _, other_leak = sections(q.text, next_of[q.entity])
                out = Outcome(
                    q.split,
                    q.direction,
                    q.side,
                    critical=q.critical,
                    shown=target in memory,
                    in_prompt=target in memory or target in core,
                    wrong=sum(1 for i in memory if i != target),
                    empty=not other_memory,
                    leak=leak or other_leak,
                )
                diagnose(q, out)
                outcomes.append(out)
            for language, messages in data["unrelated"].items():
                for message in messages:
                    for entity in entities:
                        memory, _, leak = sections(message, entity)
                        outcomes.append(Outcome(split_of[entity], "unrelated", language, empty=not memory, leak=leak))
            ask_s = time.perf_counter() - t0
    return {
        "embedder": embedder,
        "outcomes": outcomes,
        "calibration": cal,
        "weights": weights,
        "store_s": store_s,
        "ms_per_context": 1000 * ask_s / max(contexts, 1),
        "contexts": contexts,
        "k": settings.memory_top_k,
    }


# ---- report -----------------------------------------------------------------------------------
DIRECTIONS = {
    "en->xx": "English memory, question in another language",
    "xx->en": "memory in another language, English question",
    "xx->yy": "memory and question in two languages, neither English",
    "same": "control: the question in the memory's language",
}
#: the directions across languages
ACROSS = ("en->xx", "xx->en", "xx->yy")


def pick(
    outcomes: list[Outcome],
    split: str | None = None,
    directions: tuple[str, ...] = ACROSS,
    language: str | None = None,
    critical: bool | None = None,
) -> list[Outcome]:
    return [
        o
        for o in outcomes
        if (split is None or o.split == split)
        and o.direction in directions
        and (language is None or o.language == language)
        and (critical is None or o.critical == critical)
    ]


def median(values: list[float]) -> str:
    values = sorted(v for v in values if v == v)
    if not values:
        return "–"
    mid = len(values) // 2
    return f"{values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2:.3f}"


def report(data: dict[str, Any], runs: list[dict[str, Any]], seconds: float, args: argparse.Namespace) -> str:
    languages = data["languages"]
    people = data["people"]
    n_questions, n_control = len(questions_of(data)), len(questions_of(data, True)) - len(questions_of(data))
    n_unrelated = sum(len(v) for v in data["unrelated"].values())
    splits = [s for s in SPLITS if any(p["split"] == s for p in people)]
    command = (
        "`.venv/bin/python bench/bench_multilingual.py"
        + (f" --people {args.people}" if args.people else "")
        + "".join(f" --set {kv}" for kv in args.set)
        + "`"
    )
    lines = [
        "# Multilingual: the right memory across languages",
        "",
        f"{command} · {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()} · {seconds:.0f} s · set: `{args.data_name}` "
        f"({len(people)} people, {sum(len(p['memories']) for p in people)} memories; {n_questions} questions about "
        f"a memory in another language than the question's, {n_control} same-language controls; {n_unrelated} "
        f"unrelated messages in {len(data['unrelated'])} languages, each asked for every person).",
        "",
        f"- People: {', '.join(p['entity'] + ' (' + p['split'].replace('_', ' ') + ')' for p in people)}. No "
        "setting of brain was chosen on this set: the held-out people informed nothing, and a later choice may "
        "read the tuning rows only.",
        "- Settings: brain's defaults" + (f", with {', '.join(args.set)}" if args.set else "") + ". The memory "
        "section is the relevance-ranked memories (`ctx.memory`, at most `RAG_MEMORY_TOP_K`). The always-shown "
        "facts (`ctx.core`, importance 4-5) are counted apart: a target of importance 4-5 is in the prompt "
        "through them whatever the message.",
        "- Directions: " + "; ".join(f"{k}: {v}" for k, v in DIRECTIONS.items()) + "; any: the three across "
        "languages; critical: the questions about a person's critical fact (importance 5), across languages. "
        "Asked for someone else: the "
        "same question for the next person of the set (the share of empty memory sections). Another person's "
        "memory in a prompt: over every prompt of the run (must be 0).",
    ]
    for run in runs:
        cal, w = run["calibration"], run["weights"]
        lines.append(
            f"- {run['embedder']}: unrelated pairs' similarity mean {cal.mean:.3f}, sd {cal.sd:.3f} (related median "
            f"{cal.related_median:.3f}); floor {w.floor:.3f}, margin {w.margin:.3f}, w_lex {w.lexical:.3f}, w_imp "
            f"{w.importance:.3f}, floor lowered by up to {w.floor_importance:.3f} for an important memory with words "
            f"in common; "
            + (
                f"a memory in another language than its message: floor {w.across_floor:.3f} on similarity alone "
                f"(unrelated pairs across languages: mean {cal.across_mean:.3f}, sd {cal.across_sd:.3f}); "
                if w.across_floor is not None
                else "no floor of its own for a memory in another language; "
            )
            + f"memories stored in {run['store_s']:.1f} s; {run['ms_per_context']:.0f} ms per "
            f"`build_context` ({run['contexts']} contexts)."
        )
    lines += [
        "",
        "## Summary",
        "",
        "| embedder | people | direction | questions | found | target in memory section | wrong memories shown "
        "(mean) | target in prompt, always-shown facts counted | asked for someone else: section empty |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for split in (*splits, None) if len(splits) > 1 else splits:
            for label, directions, critical in (
                *((d, (d,), None) for d in ACROSS if pick(run["outcomes"], directions=(d,))),
                ("any", ACROSS, None),
                ("critical", ACROSS, True),
                ("same", ("same",), None),
            ):
                rows = pick(run["outcomes"], split, directions, critical=critical)
                if not rows:
                    continue
                lines.append(
                    "| "
                    + " | ".join(
                        [
                            SHORT[run["embedder"]],
                            (split or "all").replace("_", " "),
                            label,
                            str(len(rows)),
                            ratio(sum(o.found for o in rows), len(rows)),
                            ratio(sum(o.shown for o in rows), len(rows)),
                            f"{sum(o.wrong for o in rows) / max(len(rows), 1):.2f}",
                            ratio(sum(o.in_prompt for o in rows), len(rows)),
                            ratio(sum(o.empty for o in rows), len(rows)),
                        ]
                    )
                    + " |"
                )
    lines += [
        "",
        "| embedder | people | unrelated messages: memory section empty | prompts with another person's memory |",
        "|---|---|---|---|",
    ]
    for run in runs:
        for split in (*splits, None) if len(splits) > 1 else splits:
            rows = pick(run["outcomes"], split, ("unrelated",))
            leaks = sum(o.leak for o in run["outcomes"] if split is None or o.split == split)
            lines.append(
                f"| {SHORT[run['embedder']]} | {(split or 'all').replace('_', ' ')} | "
                f"{ratio(sum(o.empty for o in rows), len(rows))} | {leaks} |"
            )
    lines += [
        "",
        "## Per language",
        "",
        "Target in the memory section, and the mean of wrong memories shown beside it; unrelated: the share of "
        "empty memory sections. The language is the question's for en->xx and xx->yy, the memory's for xx->en.",
        "",
    ]
    head = ["language"]
    shown_directions = [d for d in ACROSS if any(pick(r["outcomes"], directions=(d,)) for r in runs)]
    for label in (*shown_directions, "unrelated empty"):
        head += [f"{label} {SHORT[r['embedder']]}" for r in runs]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for code, name in languages.items():
        cells = [f"{name} ({code})"]
        for direction in shown_directions:
            for run in runs:
                rows = pick(run["outcomes"], directions=(direction,), language=code)
                cells.append(
                    f"{ratio(sum(o.shown for o in rows), len(rows))}, "
                    f"{sum(o.wrong for o in rows) / len(rows):.1f} wrong"
                    if rows
                    else "–"
                )
        for run in runs:
            rows = pick(run["outcomes"], directions=("unrelated",), language=code)
            cells.append(ratio(sum(o.empty for o in rows), len(rows)))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Why targets miss",
        "",
        "Each target as the index ranks the person's memories without the gate: its similarity and relevance "
        "(similarity + weighted lexical match; medians), whether it ranks first or within the top k (what the "
        "section would show without the floor and the margin), and for the misses the part of the gate that "
        "dropped it (floor, margin, top k).",
        "",
        "| embedder | direction | questions | target's similarity | target's relevance | floor | target first "
        "without the gate | target in the top k without the gate | misses dropped by |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for direction in (*shown_directions, "same"):
            rows = pick(run["outcomes"], directions=(direction,))
            reasons: dict[str, int] = defaultdict(int)
            for o in rows:
                if not o.shown:
                    reasons[o.kept_out_by] += 1
            lines.append(
                f"| {SHORT[run['embedder']]} | {direction} | {len(rows)} | "
                f"{median([o.similarity for o in rows])} | {median([o.relevance for o in rows])} | "
                f"{run['weights'].floor:.3f} | {ratio(sum(o.rank == 1 for o in rows), len(rows))} | "
                f"{ratio(sum(o.rank is not None and o.rank <= run['k'] for o in rows), len(rows))} | "
                + (", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])) or "none")
                + " |"
            )
    lines += [""]
    judged = "held_out" if "held_out" in splits else None  # the goal is read on the people nothing was chosen on
    for run in runs:
        rows = pick(run["outcomes"], judged)
        rate = sum(o.found for o in rows) / max(len(rows), 1)
        by_direction = {d: pick(run["outcomes"], judged, (d,)) for d in shown_directions}
        below = [
            f"{languages[c]} {d}"
            for c in languages
            for d in shown_directions
            if (g := pick(run["outcomes"], directions=(d,), language=c)) and sum(o.found for o in g) / len(g) < GOAL
        ]
        met = rate >= GOAL and all(sum(o.found for o in g) / len(g) >= GOAL for g in by_direction.values() if g)
        lines.append(
            f"- {run['embedder']}: target found {rate:.2f} across languages for the "
            f"{(judged or 'all').replace('_', ' ')} people ("
            + ", ".join(f"{d} {sum(o.found for o in g) / len(g):.2f}" for d, g in by_direction.items() if g)
            + f"), goal {GOAL:.2f} in every direction {'met' if met else '**NOT met**'}; languages and directions "
            f"below it over everyone: {', '.join(below) or 'none'}."
        )
    lines += [""]
    return "\n".join(lines)


def main() -> None:
    os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help=f"the set (default {DATA.relative_to(ROOT)})")
    parser.add_argument("--embedders", default=",".join(EMBEDDERS), help="comma-separated (default: all three)")
    parser.add_argument(
        "--people", choices=SPLITS, help="store and ask only the people of this half (an experiment on the tuning half)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="a Settings field to override, e.g. relevance_floor_z=4 (repeatable)",
    )
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    path = args.data if args.data.is_absolute() else INVOKED_FROM / args.data
    data = load(path)
    args.data_name = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    if args.people:
        data["people"] = [p for p in data["people"] if p["split"] == args.people]
    overrides = dict(kv.split("=", 1) for kv in args.set)  # pydantic parses the strings
    t0 = time.perf_counter()
    runs = [measure(name, data, overrides) for name in args.embedders.split(",")]
    text = report(data, runs, time.perf_counter() - t0, args)
    print(text)
    if args.out:
        (args.out if args.out.is_absolute() else INVOKED_FROM / args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
