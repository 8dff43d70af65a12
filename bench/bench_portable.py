#!/usr/bin/env python
"""Benchmark of PAM export and import against raw Chroma reads and writes of the same data.

    .venv/bin/python bench/bench_portable.py [--n 100000] [--seed S] [--out bench/PORTABLE_RESULTS.md]
    .venv/bin/python bench/bench_portable.py --conversations 1000 --turns 40 --skip-memories

Builds an embedded store of ``--n`` memories (texts, tags, importance, scopes and timestamps drawn
at random; clustered random unit vectors of the store's dimension, written through ``upsert_docs``
with their embeddings, since embedding 100k texts with the real model would take far longer than
what is measured). Then, each in the same run:

- ``export_pam`` with embeddings, and without, next to raw Chroma: the same memories read with
  paged ``col.get`` (documents, metadatas, embeddings), nothing else;
- ``import_pam`` into a fresh store (vectors reused: same model), next to raw Chroma: ``col.upsert``
  of the same ids, documents, metadatas and vectors into a fresh collection in chunks of the
  client's max batch size; then the import again (a no-op by id) and once with the Engram mirror
  switched on (its write-through is part of every store write when enabled).

With ``--conversations C`` (C conversations of ``--turns`` turns, two summaries and one memory
each), a second table: ``export_pam`` with and without conversations next to raw Chroma's paged read
of the same turns and summaries, and ``import_pam`` of it into a fresh store next to raw Chroma's
upsert of the same turns with their vectors. PAM carries no vectors for turns, so the import embeds
them with the real local embedder: its share is reported. ``--skip-memories`` runs that table alone.

Prints Markdown and writes it to ``--out`` (the conversations table replaces its own section only).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

from brain.app.core import open_store  # noqa: E402
from brain.app.rag_store import RagStore  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.pam import EMBEDDINGS_FILE, MEMORY_STORE_FILE, export_pam, import_pam  # noqa: E402
from brain.providers.embeddings import LocalMiniLMEmbedder  # noqa: E402

WORDS = (
    "alice bob carol dave likes prefers visits works lives in near with tea coffee jazz hiking paris berlin "
    "tokyo project deadline birthday dentist monday friday garden piano python rust meeting sister brother "
    "allergic peanuts vegetarian marathon book film office remote morning evening flight hotel passport"
).split()
TAGS = ["food", "travel", "work", "family", "health", "music", "Sport", "home plans", "Books", "tech"]


class NoEmbedding:
    """The local embedder's name and dimension; fails if anything asks it to embed (the bench must not)."""

    def __init__(self, inner):
        self.name, self.dimension = inner.name, inner.dimension

    def embed_documents(self, texts):
        raise AssertionError(f"the benchmark embedded {len(texts)} texts; vectors should have been reused")

    embed_query = embed_documents


def make_memories(n: int, dimension: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((256, dimension)).astype(np.float32)
    vectors = centers[rng.integers(0, len(centers), n)] + 0.35 * rng.standard_normal((n, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    words = np.array(WORDS)
    docs = []
    for i in range(n):
        text = f"Memory {i}: " + " ".join(words[rng.integers(0, len(words), int(rng.integers(6, 20)))])
        scope = "global" if rng.random() < 0.7 else f"entity:user{int(rng.integers(0, 500))}"
        tags = list(rng.choice(TAGS, int(rng.integers(0, 4)), replace=False))
        docs.append({
            "text": text, "type": "memory", "scope": scope, "importance": int(rng.integers(1, 6)), "tags": tags,
            "timestamp": now - timedelta(seconds=float(rng.uniform(0, 365 * 86400))),
            "source": "chat", "embedding": vectors[i],
        })
    return docs


class TimedEmbedder:
    """The real local embedder, adding up the seconds spent embedding documents."""

    def __init__(self, inner):
        self.inner, self.seconds, self.texts = inner, 0.0, 0

    def embed_documents(self, texts):
        start = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def make_conversations(n: int, turns: int, dimension: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed + 1)
    words = np.array(WORDS)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    docs = []
    for c in range(n):
        cid = f"conv-bench-{c:05d}"
        t0 = start + timedelta(hours=c)
        vectors = rng.standard_normal((turns + 3, dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for t in range(turns):
            text = " ".join(words[rng.integers(0, len(words), int(rng.integers(5, 25)))])
            docs.append({"text": text, "type": "turn", "conversation_id": cid, "role": ("user", "assistant")[t % 2],
                         "turn_index": t + 1, "timestamp": t0 + timedelta(seconds=30 * t), "source": "chat",
                         "embedding": vectors[t]})
        for k in range(2):
            half = turns // 2
            docs.append({"text": f"Summary {k + 1} of conversation {c}: " + " ".join(words[rng.integers(0, len(words), 30)]),
                         "type": "summary", "conversation_id": cid, "summary_index": k + 1,
                         "turn_range": f"{k * half + 1}-{(k + 1) * half}", "timestamp": t0 + timedelta(minutes=60),
                         "embedding": vectors[turns + k]})
        docs.append({"text": f"Memory from conversation {c}", "type": "memory", "conversation_id": cid,
                     "timestamp": t0 + timedelta(minutes=61), "source": "chat", "embedding": vectors[turns + 2]})
    return docs


def raw_read_conversations(col, vectors: bool = False) -> tuple[list, list, list, list]:
    """The turns and summaries as an export needs them: texts and metadata (vectors only on request)."""
    ids, docs, metas, vecs = [], [], [], []
    offset = 0
    where = {"type": {"$in": ["turn", "summary"]}}
    include = ["documents", "metadatas"] + (["embeddings"] if vectors else [])
    while True:
        page = col.get(where=where, include=include, limit=2000, offset=offset)
        if not page["ids"]:
            return ids, docs, metas, vecs
        ids += page["ids"]
        docs += page["documents"]
        metas += page["metadatas"]
        if vectors:
            vecs.append(np.asarray(page["embeddings"], dtype=np.float32))
        offset += len(page["ids"])


def bench_conversations(args, work: Path, store, local) -> list[str]:
    source = store("conv-source")
    docs = make_conversations(args.conversations, args.turns, source.dimension, args.seed)
    build = 0.0
    for start in range(0, len(docs), 5000):
        seconds, _ = timed(lambda: source.upsert_docs(docs[start : start + 5000]))
        build += seconds
    print(f"  built the conversation store: {build:.1f} s", file=sys.stderr, flush=True)
    n_turns, n_summaries = source.count("turn"), source.count("summary")
    assert n_turns == args.conversations * args.turns, n_turns
    raw_get, _ = timed(lambda: raw_read_conversations(source.col), "raw get of turns")
    ids, texts, metas, vecs = raw_read_conversations(source.col, vectors=True)  # for the raw write
    vectors = np.concatenate(vecs)
    export_s, report = timed(lambda: export_pam(source, work / "conv-pam"), "export with conversations")
    assert report.conversations == args.conversations and report.messages == n_turns, report
    plain_s, _ = timed(lambda: export_pam(source, work / "conv-plain", conversations=False), "export without")
    conv_bytes = sum(p.stat().st_size for p in (work / "conv-pam" / "conversations").iterdir())
    raw_put, _ = timed(lambda: raw_write(store("conv-raw").client, "raw-copy", ids, texts, metas, vectors), "raw upsert")
    embedder = TimedEmbedder(local)
    target = open_store(Settings(data_dir=work / "conv-target", mirror_enabled=False), embedder=embedder)
    import_s, imported = timed(lambda: import_pam(target, work / "conv-pam"), "import with conversations")
    assert imported.conversation_new == n_turns + n_summaries, imported
    embed_s, embedded = embedder.seconds, embedder.texts
    again_s, again = timed(lambda: import_pam(target, work / "conv-pam"), "import again")
    assert again.written == 0 and embedder.texts == embedded, again
    target.close()
    n = n_turns + n_summaries
    rows = [
        ("raw Chroma: paged `col.get` of the turns and summaries, texts and metadata (reference)", raw_get, "1.00"),
        ("`export_pam` with conversations (and embeddings)", export_s, f"{export_s / raw_get:.2f}"),
        ("`export_pam` with `conversations=False` (memories alone)", plain_s, f"{plain_s / raw_get:.2f}"),
        ("raw Chroma: `col.upsert` of the same turns and summaries with vectors (reference)", raw_put, "1.00"),
        ("`import_pam` into a fresh store (turns embedded by the real model)", import_s, f"{import_s / raw_put:.2f}"),
        (f"… of which embedding {embedded:,} texts ({local.name})", embed_s, f"{embed_s / raw_put:.2f}"),
        ("… the rest (read, validate, map, write)", import_s - embed_s, f"{(import_s - embed_s) / raw_put:.2f}"),
        ("`import_pam` again (unchanged: writes and embeds nothing)", again_s, f"{again_s / raw_put:.2f}"),
    ]
    return [
        "## Conversations",
        "",
        f"`bench/bench_portable.py --conversations {args.conversations} --turns {args.turns} --seed {args.seed}`, "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; same machine notes as above.",
        "",
        f"{args.conversations:,} conversations x {args.turns} turns ({n_turns:,} turns), {n_summaries:,} summaries, "
        f"{args.conversations:,} memories naming their conversation; built with random vectors in {build:.1f} s. "
        f"Conversation files: {conv_bytes / 1e6:.1f} MB in {report.conversations:,} files. Ratios: export against "
        "the raw read, import against the raw write, of the same turns and summaries in the same run.",
        "",
        "| step | seconds | documents/s | x reference |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {seconds:.2f} | {n / seconds:,.0f} | {ratio} |" for name, seconds, ratio in rows),
        "",
        "PAM has no vectors for turns or summaries, so an import embeds them from their text; the rest of the "
        "import is the same validation (official conversation schema per file), mapping, comparison and single "
        "`upsert_docs` batch as for memories.",
        "",
    ]


def timed(fn, label: str | None = None):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    if label:
        print(f"  {label}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return seconds, result


def raw_read(col) -> tuple[list, list, list, list]:
    ids, docs, metas, vecs = [], [], [], []
    offset = 0
    while True:
        page = col.get(where={"type": "memory"}, include=["documents", "metadatas", "embeddings"], limit=2000, offset=offset)
        if not page["ids"]:
            return ids, docs, metas, vecs
        ids += page["ids"]
        docs += page["documents"]
        metas += page["metadatas"]
        vecs.append(np.asarray(page["embeddings"], dtype=np.float32))
        offset += len(page["ids"])


def raw_write(client, name: str, ids, docs, metas, vectors) -> None:
    col = client.get_or_create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    step = int(client.get_max_batch_size())
    for start in range(0, len(ids), step):
        end = start + step
        col.upsert(ids=ids[start:end], documents=docs[start:end], metadatas=metas[start:end], embeddings=vectors[start:end])


def bench_memories(args, work: Path, store, embedder) -> list[str]:
    source = store("source")
    memories = make_memories(args.n, source.dimension, args.seed)
    build = 0.0
    for start in range(0, len(memories), 5000):
        seconds, _ = timed(lambda: source.upsert_docs(memories[start : start + 5000]))
        build += seconds
    print(f"  built the store: {build:.1f} s", file=sys.stderr, flush=True)
    n = source.count("memory")
    assert n == args.n, (n, args.n)

    raw_get, (ids, docs, metas, vecs) = timed(lambda: raw_read(source.col), "raw get")
    vectors = np.concatenate(vecs)
    export_s, report = timed(lambda: export_pam(source, work / "pam"), "export")
    export_plain_s, _ = timed(lambda: export_pam(source, work / "pam-plain", embeddings=False), "export, no embeddings")
    sizes = {name: (work / "pam" / name).stat().st_size for name in (MEMORY_STORE_FILE, EMBEDDINGS_FILE)}

    raw_put, _ = timed(lambda: raw_write(store("raw").client, "raw-copy", ids, docs, metas, vectors), "raw upsert")
    target = store("target")
    import_s, imported = timed(lambda: import_pam(target, work / "pam"), "import")
    assert imported.new == n and imported.vectors_reused == n and imported.vectors_embedded == 0, imported
    again_s, again = timed(lambda: import_pam(target, work / "pam"), "import")
    assert again.unchanged == n and again.written == 0, again
    mirrored = open_store(Settings(data_dir=work / "mirrored", mirror_enabled=True), embedder=embedder)
    mirror_s, _ = timed(lambda: import_pam(mirrored, work / "pam"), "import, mirror on")
    assert mirrored.count("memory") == n

    def rate(seconds: float) -> str:
        return f"{n / seconds:,.0f}"

    rows = [
        ("raw Chroma: paged `col.get` of the memories (reference)", raw_get, rate(raw_get), "1.00"),
        ("`export_pam` with embeddings", export_s, rate(export_s), f"{export_s / raw_get:.2f}"),
        ("`export_pam` without embeddings", export_plain_s, rate(export_plain_s), f"{export_plain_s / raw_get:.2f}"),
        ("raw Chroma: `col.upsert` into a fresh collection (reference)", raw_put, rate(raw_put), "1.00"),
        ("`import_pam` into a fresh store (vectors reused)", import_s, rate(import_s), f"{import_s / raw_put:.2f}"),
        ("`import_pam` again (unchanged: writes nothing)", again_s, rate(again_s), f"{again_s / raw_put:.2f}"),
        ("`import_pam` into a fresh store with the Engram mirror on", mirror_s, rate(mirror_s), f"{mirror_s / raw_put:.2f}"),
    ]
    lines = [
        "# PAM export / import benchmark",
        "",
        f"`bench/bench_portable.py --n {args.n} --seed {args.seed}`, "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other work running at the same time "
        "(figures are indicative: expect run-to-run noise).",
        "",
        f"{n:,} memories, {source.dimension}-d clustered random unit vectors under the store's model name "
        f"({source.embedder.name}); the store was built through `upsert_docs` with these vectors in "
        f"{build:.1f} s. Export: `memory-store.json` {sizes[MEMORY_STORE_FILE] / 1e6:.1f} MB, "
        f"`embeddings.json` {sizes[EMBEDDINGS_FILE] / 1e6:.1f} MB. Ratios: export against the raw read, "
        "import against the raw write, of the same data in the same run.",
        "",
        "| step | seconds | memories/s | x reference |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {seconds:.2f} | {per_s} | {ratio} |" for name, seconds, per_s, ratio in rows),
        "",
        "Export = read every memory with its vector, map it to PAM, RFC 8785 checksum over all memories, "
        "validate the document against the official schema, serialise (orjson; float32 vectors in their "
        "shortest round-trip form), write both files atomically. Import = parse, validate both files "
        "(official schemas with jsonschema-rs, content hashes, integrity checksum, embedding references), "
        "map, compare with what is stored, one `upsert_docs` batch (validated whole) with the reused vectors. "
        "The Engram mirror is off in the other rows (the raw references write Chroma alone).",
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "PORTABLE_RESULTS.md")
    parser.add_argument("--conversations", type=int, default=0, help="conversations for the second table (0: none)")
    parser.add_argument("--turns", type=int, default=40, help="turns per conversation (default 40)")
    parser.add_argument("--skip-memories", action="store_true", help="run the conversations table alone")
    args = parser.parse_args()

    local = LocalMiniLMEmbedder()
    embedder = NoEmbedding(local)
    work = Path(tempfile.mkdtemp(prefix="bench-portable-"))
    try:
        def store(name: str, **settings) -> RagStore:
            return open_store(Settings(data_dir=work / name, mirror_enabled=False, **settings), embedder=embedder)

        if not args.skip_memories:
            memory_lines = bench_memories(args, work, store, embedder)
        else:
            text = args.out.read_text(encoding="utf-8") if args.out.exists() else "# PAM export / import benchmark\n"
            memory_lines = [text.split("## Conversations")[0].rstrip("\n"), ""]
        lines = memory_lines + (bench_conversations(args, work, store, local) if args.conversations else [])
        text = "\n".join(lines)
        print(text)
        args.out.write_text(text, encoding="utf-8")
        print(f"written to {args.out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
