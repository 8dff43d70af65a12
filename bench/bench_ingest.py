#!/usr/bin/env python
"""Benchmark of knowledge-base ingestion with the local embedder, against the embedder's own speed.

    .venv/bin/python bench/bench_ingest.py [--mb 5] [--files N] [--seed S] [--out bench/INGEST_RESULTS.md]

Generates about ``--mb`` MB of Markdown (many files; sections of lognormal length, some with Q:/A:
blocks; words drawn with their natural frequencies from the Python standard library's docstrings and
brain's own documentation), ingests it into a fresh embedded store with the local MiniLM embedder
and reports documents/s and where the time went. Then it embeds exactly the same chunk texts with
``embed_documents`` alone (same embedder, same batch size) for the reference throughput, re-runs
the ingestion on the unchanged files (speed-up), and once more after editing a few files. Prints a
Markdown table and writes the same text to ``--out``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Settings reads config/defaults.env relative to the working directory

import brain.features.ingest as brain_ingest  # noqa: E402
import brain.features.ingest.apply as ingest_apply  # noqa: E402
import brain.features.ingest.files as ingest_files  # noqa: E402
from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.ingest import ingest_paths  # noqa: E402
from brain.providers.embeddings import LocalMiniLMEmbedder  # noqa: E402
from brain.rules.chunking import TokenChunker  # noqa: E402
from brain.text.markdown import slugify  # noqa: E402

TARGET_RATIO = 0.9
TARGET_SPEEDUP = 50.0


def corpus_words() -> list[str]:
    """A word stream with natural frequencies: stdlib docstrings plus brain's own docs."""
    import importlib

    names = ("argparse", "collections", "csv", "email", "json", "logging", "pathlib", "subprocess", "textwrap",
             "unittest", "urllib.request", "zipfile")
    texts = []
    for module in map(importlib.import_module, names):
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj) if (inspect.isclass(obj) or inspect.isfunction(obj)) else None
            if doc:
                texts.append(doc)
    for path in [ROOT / "README.md", ROOT / "persona.md", *sorted((ROOT / "config" / "kb").glob("*.md"))]:
        if path.exists():
            texts.append(path.read_text(encoding="utf-8"))
    words = re.findall(r"[A-Za-z][a-z]+(?:'[a-z]+)?", "\n".join(texts))
    return [w.lower() if not w.isupper() else w for w in words]


def generate(root: Path, megabytes: float, files: int, seed: int, folders: int = 10) -> tuple[int, int]:
    """Write Markdown files under ``root``; returns (files, bytes)."""
    rng = random.Random(seed)
    words = corpus_words()
    budget = int(megabytes * 1_000_000)
    per_file = budget // files
    written = 0

    def sentence() -> str:
        n = rng.randint(6, 24)
        start = rng.randrange(0, len(words) - n)
        ws = words[start:start + n] if rng.random() < 0.3 else [rng.choice(words) for _ in range(n)]
        return " ".join(ws).capitalize() + rng.choice([".", ".", ".", "?", "!", ";", ":"])

    def paragraph(n_words: int) -> str:
        out, count = [], 0
        while count < n_words:
            s = sentence()
            out.append(s)
            count += s.count(" ") + 1
        return " ".join(out)

    for i in range(files):
        sub = root / f"area{i % folders:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        parts = [f"---\ntopic: area{i % folders}\nspecialist: {rng.choice(['web_search', 'ocr', 'vision', 'docs'])}\n---",
                 f"# {paragraph(4).rstrip('.?!;:')}", paragraph(40)]
        size = sum(len(p) for p in parts)
        while size < per_file:
            # section lengths: lognormal, median ~90 words, long tail to a few thousand
            n_words = int(min(3000, max(8, rng.lognormvariate(4.5, 1.0))))
            section = [f"## {paragraph(3).rstrip('.?!;:')}"]
            if rng.random() < 0.25:
                for _ in range(rng.randint(1, 4)):
                    section.append(f"Q: {sentence().rstrip('.!;:')}?\nA: {paragraph(rng.randint(10, 80))}")
            else:
                left = n_words
                while left > 0:
                    chunk = min(left, rng.randint(40, 160))
                    section.append(paragraph(chunk))
                    left -= chunk
            text = "\n\n".join(section)
            parts.append(text)
            size += len(text) + 2
        data = ("\n\n".join(parts) + "\n").encode("utf-8")
        (sub / f"kb-{i:04d}.md").write_bytes(data)
        written += len(data)
    return files, written


class Timed:
    """Wraps a callable, summing the seconds spent in it."""

    def __init__(self, fn):
        self.fn, self.seconds, self.calls, self.items = fn, 0.0, 0, 0
        self.texts: list[str] = []

    def __call__(self, arg, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.fn(arg, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1
            try:
                self.items += len(arg)
            except TypeError:
                pass

    def reset(self):
        self.seconds, self.calls, self.items = 0.0, 0, 0


def run(args) -> str:
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def planned_texts(directory: Path, chunker: TokenChunker) -> list[str]:
    """The texts ingesting ``directory`` into an empty store embeds (unique, as ingestion dedupes them)."""
    texts: dict[str, None] = {}
    for path in sorted(directory.rglob("*.md")):
        parsed = brain_ingest.parse_markdown(ingest_files.decode_text(path.read_bytes()), slugify(path.stem))
        for doc in ingest_files.file_documents(brain_ingest.kb_name(path), "-", parsed.drafts, chunker):
            texts.setdefault(doc["text"], None)
    return list(texts)


def _run(args, work: Path) -> str:
    load = os.getloadavg()
    settings = Settings(data_dir=work / "data")
    embedder = LocalMiniLMEmbedder(batch_size=settings.embed_batch_size, cache_size=settings.query_cache_size)
    embedder.warm_up()
    # the first pass over new input shapes grows onnxruntime's memory arena (~10% slower once):
    # pay that before any timed run so both sides see a warm model
    rng = random.Random(args.seed - 1)
    words = corpus_words()
    warm = [" ".join(rng.choice(words) for _ in range(n)) for n in range(4, 260, 2)]
    embedder.embed_documents(warm)
    embedder.embed_documents(warm)

    kb = work / "kb"
    # the work folder is a project, so a folder's files are named the same whether the folder or
    # its parent is ingested (outside a project each root is named by its own folder)
    (work / "config").mkdir()
    (work / "config" / "defaults.env").write_text("")
    t0 = time.perf_counter()
    n_files, n_bytes = generate(kb, args.mb, args.files, args.seed, args.parts)
    gen_s = time.perf_counter() - t0
    parts = sorted(p for p in kb.iterdir() if p.is_dir())
    print(f"generated {n_files} files in {len(parts)} folders, {n_bytes / 1e6:.2f} MB in {gen_s:.1f} s", file=sys.stderr)

    store = open_store(settings, embedder=embedder)
    real_embed = embedder.embed_documents
    embed = Timed(real_embed)
    embedder.embed_documents = embed  # type: ignore[method-assign]
    plan = Timed(ingest_apply.plan_file)
    ingest_apply.plan_file = plan
    write = Timed(ingest_apply._write_group)
    ingest_apply._write_group = write
    chunker = TokenChunker.from_settings(settings)

    # 1. first ingestion into a fresh store, one folder at a time, each folder's texts also embedded
    #    alone (embed_documents, one call, same embedder and batch size) right before or after it
    #    (alternating), so that the machine's drift hits both sides alike
    ingest_s = alone_s = 0.0
    docs = texts_total = 0
    per_part = []
    for i, part in enumerate(parts):
        texts = planned_texts(part, chunker)

        def alone(texts: list[str]) -> float:
            t = time.perf_counter()
            real_embed(texts)
            return time.perf_counter() - t

        def ingest(part: Path) -> tuple[float, object]:
            t = time.perf_counter()
            report = ingest_paths(store, [part], chunker=chunker, progress=args.progress)
            return time.perf_counter() - t, report

        if i % 2 == 0:
            (t_ingest, report), t_alone = ingest(part), alone(texts)
        else:
            t_alone = alone(texts)
            t_ingest, report = ingest(part)
        assert report.ok and report.added == report.embedded == len(texts), (report.added, report.embedded, len(texts))
        ingest_s += t_ingest
        alone_s += t_alone
        docs += report.added
        texts_total += len(texts)
        per_part.append((report.added / t_ingest) / (len(texts) / t_alone))
        print(f"  {part.name}: {report.added} documents, ingest {t_ingest:.1f} s, embedder alone {t_alone:.1f} s "
              f"(ratio {per_part[-1]:.3f})", file=sys.stderr)
    embed_in_ingest_s, write_s, plan_s = embed.seconds, write.seconds, plan.seconds
    other_s = ingest_s - embed_in_ingest_s - write_s - plan_s
    all_texts = [d.text for d in store.get(where={"source": "kb"})]
    assert len(all_texts) == docs
    tokens = [chunker.count_tokens(t) for t in all_texts]

    # 2. re-run on the unchanged files
    embed.reset()
    write.reset()
    upserts = Timed(store.upsert_docs)
    store.upsert_docs = upserts  # type: ignore[method-assign]
    t0 = time.perf_counter()
    again = ingest_paths(store, [kb], chunker=chunker)
    again_s = time.perf_counter() - t0
    assert again.ok and again.added == again.removed == again.embedded == 0 and embed.calls == upserts.calls == 0, (
        again.to_dict(), embed.calls, upserts.calls)
    assert again.unchanged == docs

    # 3. an edit: one section appended to 1% of the files, one file deleted (--prune)
    rng = random.Random(args.seed + 1)
    paths = sorted(kb.rglob("*.md"))
    edited = rng.sample(paths, max(1, len(paths) // 100))
    for path in edited:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"\n## An added section\nThis section was added to {path.name} after the first ingestion.\n")
    gone = next(p for p in paths if p not in edited)
    gone.unlink()
    t0 = time.perf_counter()
    edit = ingest_paths(store, [kb], chunker=chunker, prune=True)
    edit_s = time.perf_counter() - t0
    assert edit.ok and edit.added == edit.embedded == edit.updated == len(edited)
    assert edit.removed > 0 and edit.missing_files == [brain_ingest.kb_name(gone)]

    ingest_dps = docs / ingest_s
    alone_dps = texts_total / alone_s
    ratio = ingest_dps / alone_dps
    speedup = ingest_s / again_s
    by_len = defaultdict(int)
    for t in tokens:
        by_len[min(t // 50 * 50, 250)] += 1

    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    import chromadb
    import onnxruntime
    import tokenizers

    lines = [
        "# brain knowledge-base ingestion benchmark",
        "",
        f"- machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), load average "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at start; Python {platform.python_version()}, chromadb "
        f"{chromadb.__version__}, onnxruntime {onnxruntime.__version__}, tokenizers {tokenizers.__version__}",
        f"- run: {now}; `bench/bench_ingest.py --mb {args.mb:g} --files {args.files} --parts {args.parts} "
        f"--seed {args.seed}`",
        f"- data: {n_files} Markdown files in {len(parts)} folders, {n_bytes / 1e6:.2f} MB (generated in {gen_s:.1f} s): "
        f"front matter, sections of lognormal length (median ~90 words, up to 3000), a quarter of them Q:/A: "
        f"blocks; words drawn with their natural frequencies from stdlib docstrings and brain's docs",
        f"- embedder: {embedder.name}, batch size {embedder.batch_size}; chunker: window {chunker.window_size}, "
        f"overlap {chunker.window_overlap} tokens; ingestion embeds new texts in groups of up to "
        f"{ingest_apply.EMBED_GROUP} across files, each group written in one call",
        f"- documents: {docs:,} ({sum(tokens):,} tokens; tokens per document: "
        + ", ".join(f"{k}-{k + 49 if k < 250 else 254}: {v:,}" for k, v in sorted(by_len.items())) + ")",
        f"- method: the first ingestion goes folder by folder into one fresh embedded store; each folder's "
        f"texts are also embedded alone (`embed_documents`, one call: the embedder's best case, one global length "
        f"sort) right before or after it, alternating, because this shared machine's speed drifts by up to 2x "
        f"between minutes. Per-folder ratios: min {min(per_part):.3f}, median {sorted(per_part)[len(per_part) // 2]:.3f}, "
        f"max {max(per_part):.3f}.",
        "",
        "| metric | measured | reference | ratio | target | ok? |",
        "|---|---|---|---|---|---|",
        f"| first ingestion (documents/s) | {ingest_dps:,.1f} ({docs:,} in {ingest_s:.1f} s) | "
        f"{alone_dps:,.1f} embed_documents alone, same texts ({alone_s:.1f} s) | {ratio:.3f} | >= {TARGET_RATIO} | "
        f"{'yes' if ratio >= TARGET_RATIO else 'NO'} |",
        f"| time embedding, share of the first ingestion | {embed_in_ingest_s / ingest_s:.1%} ({embed_in_ingest_s:.1f} s) | | | | |",
        f"| time reading, parsing, chunking, hashing | {plan_s / ingest_s:.1%} ({plan_s:.1f} s) | | | | |",
        f"| time writing to Chroma (upsert of new documents, delete of stale ones) | {write_s / ingest_s:.1%} ({write_s:.1f} s) | | | | |",
        f"| time otherwise (listing files, reading the store's ingested metadata, re-use look-ups) | "
        f"{other_s / ingest_s:.1%} ({other_s:.1f} s) | | | | |",
        f"| re-run, nothing changed | {again_s:.2f} s ({again.unchanged:,} unchanged, 0 embedded, 0 written) | "
        f"{ingest_s:.1f} s first ingestion | {speedup:,.0f}x faster | >= {TARGET_SPEEDUP:.0f}x | "
        f"{'yes' if speedup >= TARGET_SPEEDUP else 'NO'} |",
        f"| re-run after editing {len(edited)} files and deleting 1 (--prune) | {edit_s:.2f} s "
        f"(+{edit.added} added, {edit.embedded} embedded, {edit.removed} removed, {edit.updated} files changed) | | | | |",
        "",
    ]
    if args.mb < 5:
        per_mb = (ingest_s + alone_s) / (n_bytes / 1e6)
        lines += [f"At this run's rate, 5 MB would take about {per_mb * 5 / 60:.1f} min (ingestion plus the "
                  f"embedder-alone reference).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="megabytes of Markdown to generate (default 5)")
    parser.add_argument("--files", type=int, default=250, help="number of files (default 250)")
    parser.add_argument("--parts", type=int, default=10, help="folders; each is ingested and measured in turn (default 10)")
    parser.add_argument("--seed", type=int, default=20241121)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "INGEST_RESULTS.md")
    parser.add_argument("--progress", action="store_true", help="show the ingestion's progress bar")
    parser.add_argument("--group", type=int, help="override brain.features.ingest.apply.EMBED_GROUP (texts embedded per batch)")
    args = parser.parse_args()
    if args.group:
        ingest_apply.EMBED_GROUP = args.group
    text = run(args)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
