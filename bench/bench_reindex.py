#!/usr/bin/env python
"""Benchmark of ``brain reindex``: documents/s of a re-index against the embedder's own throughput.

    .venv/bin/python bench/bench_reindex.py [--n 2000] [--out bench/REINDEX_RESULTS.md]

1. Builds an embedded store of ``n`` documents (memories, turns, FAQ entries, summaries) with the
   Ollama stub's nomic-embed-text (768-d, tests/ollama_stub.py: vectors from a hash, so building is fast).
2. Times the local model (MiniLM, 384-d) embedding the same texts in one call (it batches them in
   length order): the embedder's own throughput, the ceiling of a re-index. Timed before and after
   (3), and averaged, since the machine is shared.
3. Re-indexes the store for the local model (``brain.app.reindex.run``) and reports its documents/s and
   the ratio to (2) (target >= 0.85: reading, writing Chroma and the mirror cost little beside the model).
4. Re-indexes back for nomic-embed-text: the mirror holds the nomic vectors of the mirrored documents
   from (1), so those are reused, not embedded; reports the share reused.

All of it twice: with short texts (about 12 words) and with texts of a chat store's lengths (a memory
about 20 words, a turn 35, a summary 70, a FAQ section 130). A re-index costs the embedder's time
plus Chroma's own write of each document, which a second thread overlaps with the embedding; on two
cores the model takes both, so that write shows most beside a fast model on short texts.

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

from brain.app import reindex
from brain.app.core import open_store
from brain.config import Settings
from brain.providers.embeddings import LocalMiniLMEmbedder
from tests.ollama_stub import OllamaStub

NOMIC = "ollama/nomic-embed-text"
TOPICS = ("travel", "food", "work", "family", "health", "music", "money", "sport")


def make_docs(n: int, *, chat_length: bool = False) -> list[dict]:
    """``n`` documents of every type. Short ones (about 12 words each) by default; ``chat_length``
    pads each to a length like a chat store's: a memory about 20 words, a turn 35, a summary 70 and a
    FAQ entry 130 (a section of a knowledge-base page)."""
    pad = {"memory": 8, "turn": 23, "summary": 58, "faq": 118} if chat_length else {}
    docs: list[dict] = []
    for k in range(n):
        topic = TOPICS[k % len(TOPICS)]
        kind = k % 8
        if kind < 3:
            doc = {"text": f"Memory {k}: the user mentioned {topic} plans, detail number {k * 7 % 101}.",
                   "type": "memory", "importance": 1 + k % 5, "tags": [topic]}
        elif kind < 6:
            doc = {"text": f"Turn {k}: we talked about {topic} and what to do next ({k}).", "type": "turn",
                   "conversation_id": f"conv-{k % 50}", "role": "user" if k % 2 else "assistant"}
        elif kind == 6:
            doc = {"text": f"FAQ {k}: how does {topic} work here? It works like case {k}.", "type": "faq",
                   "topic": topic}
        else:
            doc = {"text": f"Summary {k}: a conversation about {topic}, settled at point {k}.",
                   "type": "summary", "conversation_id": f"conv-{k % 50}"}
        words = pad.get(doc["type"], 0)
        if words:
            doc["text"] += " " + " ".join(FILLER[(k + j) % len(FILLER)] for j in range(words)) + "."
        docs.append(doc)
    return docs


FILLER = ("later", "weekend", "planned", "because", "the", "train", "was", "late", "again", "so", "we",
          "moved", "dinner", "to", "thursday", "and", "asked", "about", "tickets", "prices", "for", "children",
          "while", "she", "checked", "her", "calendar", "before", "booking", "anything", "else", "online")


def embed_alone(embedder: LocalMiniLMEmbedder, texts: list[str]) -> float:
    """The embedder's own documents/s on ``texts``: one call, which it batches in length order."""
    started = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


def measure(n: int, *, chat_length: bool) -> dict:
    """One store of ``n`` documents re-indexed to the local model and back (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-reindex-"))
    with OllamaStub() as stub:
        settings = Settings(data_dir=tmp / "data", embedder=NOMIC, ollama_host=stub.url)
        docs = make_docs(n, chat_length=chat_length)
        with open_store(settings) as store:
            for s in range(0, len(docs), 500):
                store.upsert_docs(docs[s : s + 500])
            texts = store.chroma.get_all(None, ["documents"])["documents"]
            local = LocalMiniLMEmbedder(batch_size=settings.embed_batch_size, cache_size=settings.query_cache_size)
            local.embed_documents(texts[:64])  # the model loads outside the timings
            alone = [embed_alone(local, texts)]
            forward = reindex.run(store, local, progress=False)
            alone.append(embed_alone(local, texts))  # before and after: the machine is shared
            stub.clear()
            back = reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
            mirrored = sum(1 for d in docs if d["type"] in settings.mirrored_types)
    words = sum(len(t.split()) for t in texts) / len(texts)
    return {"total": len(texts), "words": words, "alone": alone, "forward": forward, "back": back,
            "mirrored": mirrored, "mirrored_types": settings.mirrored_types}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "REINDEX_RESULTS.md")
    args = parser.parse_args()
    rows = []
    for label, chat_length in (("short texts", False), ("chat-length texts", True)):
        m = measure(args.n, chat_length=chat_length)
        embed_rate = sum(m["alone"]) / len(m["alone"])
        forward, back, total = m["forward"], m["back"], m["total"]
        ratio = forward.rate / embed_rate
        rows += [
            (f"**{label}**: documents (mean words)", f"{total} ({m['words']:.0f})"),
            (f"{label}: local model alone (same texts in one call; mean of a run before and after)",
             f"{embed_rate:.1f} docs/s ({m['alone'][0]:.1f} and {m['alone'][1]:.1f})"),
            (f"{label}: re-index nomic -> local", f"{forward.rate:.1f} docs/s ({forward.seconds:.1f} s; embedding "
                                                  f"{forward.embed_seconds:.1f} s of it)"),
            (f"{label}: ratio re-index / embedder", f"{ratio:.2f} (target >= 0.85: {'met' if ratio >= 0.85 else 'NOT met'})"),
            (f"{label}: re-index local -> nomic, vectors reused from the mirror",
             f"{back.reused} of {total} ({100 * back.reused / total:.0f}%; the mirrored types are "
             f"{', '.join(m['mirrored_types'])}: {m['mirrored']} documents)"),
            (f"{label}: re-index local -> nomic, texts sent to the embedder", f"{back.embedded}"),
        ]
    load = os.getloadavg()
    lines = [
        "# brain reindex benchmark",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end, Python {platform.python_version()}, embedded Chroma.",
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
