#!/usr/bin/env python
"""Benchmark of ``brain reindex``: documents/s of a re-index against the embedder's own throughput.

    .venv/bin/python bench/bench_reindex.py [--n 2000] [--out bench/REINDEX_RESULTS.md]

1. Builds an embedded store of ``n`` documents (memories, turns, FAQ entries, summaries) with the
   Ollama stub's nomic-embed-text (768-d, tests/ollama_stub.py: vectors from a hash, so building is fast).
2. Times the local model (MiniLM, 384-d) embedding the same texts in one call (it batches them in
   length order): the embedder's own throughput, the ceiling of a re-index. Timed before and after
   (3), and averaged, since the machine is shared.
3. Re-indexes the store for the local model (``brain.reindex.run``) and reports its documents/s and
   the ratio to (2) (target >= 0.85: reading, writing Chroma and the mirror cost little beside the model).
4. Re-indexes back for nomic-embed-text: the mirror holds the nomic vectors of the mirrored documents
   from (1), so those are reused, not embedded; reports the share reused.

Prints Markdown and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

from brain import reindex
from brain.config import Settings
from brain.core import open_store
from brain.embeddings import LocalMiniLMEmbedder
from tests.ollama_stub import OllamaStub

NOMIC = "ollama/nomic-embed-text"
TOPICS = ("travel", "food", "work", "family", "health", "music", "money", "sport")


def make_docs(n: int) -> list[dict]:
    docs: list[dict] = []
    for k in range(n):
        topic = TOPICS[k % len(TOPICS)]
        kind = k % 8
        if kind < 3:
            docs.append({"text": f"Memory {k}: the user mentioned {topic} plans, detail number {k * 7 % 101}.",
                         "type": "memory", "importance": 1 + k % 5, "tags": [topic]})
        elif kind < 6:
            docs.append({"text": f"Turn {k}: we talked about {topic} and what to do next ({k}).", "type": "turn",
                         "conversation_id": f"conv-{k % 50}", "role": "user" if k % 2 else "assistant"})
        elif kind == 6:
            docs.append({"text": f"FAQ {k}: how does {topic} work here? It works like case {k}.", "type": "faq",
                         "topic": topic})
        else:
            docs.append({"text": f"Summary {k}: a conversation about {topic}, settled at point {k}.",
                         "type": "summary", "conversation_id": f"conv-{k % 50}"})
    return docs


def embed_alone(embedder: LocalMiniLMEmbedder, texts: list[str]) -> float:
    """The embedder's own documents/s on ``texts``: one call, which it batches in length order."""
    started = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "REINDEX_RESULTS.md")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-reindex-"))
    with OllamaStub() as stub:
        settings = Settings(data_dir=tmp / "data", embedder=NOMIC, ollama_host=stub.url)
        docs = make_docs(args.n)
        with open_store(settings) as store:
            for s in range(0, len(docs), 500):
                store.upsert_docs(docs[s : s + 500])
            texts = store.chroma.get_all(None, ["documents"])["documents"]
            total = len(texts)
            local = LocalMiniLMEmbedder(settings)
            local.embed_documents(texts[:64])  # the model loads outside the timings
            alone = [embed_alone(local, texts)]
            forward = reindex.run(store, local, progress=False)
            alone.append(embed_alone(local, texts))  # before and after: the machine is shared
            embed_rate = sum(alone) / len(alone)
            stub.clear()
            back = reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
            mirrored = sum(1 for d in docs if d["type"] in settings.mirrored_types)
    ratio = forward.rate / embed_rate
    rows = [
        ("documents", f"{total}"),
        ("local model alone (same texts in one call; mean of a run before and after)",
         f"{embed_rate:.1f} docs/s ({alone[0]:.1f} and {alone[1]:.1f})"),
        ("re-index nomic -> local", f"{forward.rate:.1f} docs/s ({forward.seconds:.1f} s; embedding "
                                    f"{forward.embed_seconds:.1f} s of it)"),
        ("ratio re-index / embedder", f"{ratio:.2f} (target >= 0.85)"),
        ("re-index local -> nomic: vectors reused from the mirror",
         f"{back.reused} of {total} ({100 * back.reused / total:.0f}%; the mirrored types are "
         f"{', '.join(settings.mirrored_types)}: {mirrored} documents)"),
        ("re-index local -> nomic: texts sent to the embedder", f"{back.embedded}"),
    ]
    lines = [
        "# brain reindex benchmark",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, {os.cpu_count()} cores "
        f"shared with other jobs (numbers are indicative), Python {platform.python_version()}, embedded Chroma.",
        "`python bench/bench_reindex.py --n N`: see its docstring for the method.",
        "",
        "| measure | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in rows],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
