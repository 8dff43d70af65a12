#!/usr/bin/env python
"""What one knowledge-base file costs `brain ingest` as it grows: the largest shipped `config/kb` file
against generated Markdown of 256 KiB, the cap and 4 MiB (``--sizes``; the cap is always added), each
in a fresh data directory.

    .venv/bin/python bench/bench_ingest_cap.py [--runs 1] [--sizes 262144,4194304] [--out bench/INGEST_CAP_RESULTS.md]

Every figure is a whole new `brain --data-dir DIR ingest FILE` process (a fresh data directory each
time, so every chunk is embedded and written), timed from spawn to exit; its peak RSS is the child's
``ru_maxrss`` (``resource.getrusage(RUSAGE_CHILDREN)``, read by a small parent process that runs only
that child). The generated files are sections of ~0.5-3 KB of prose (a heading, sentences of words
drawn with a fixed seed, so no two chunks share a text and none re-uses another's vector), whole
sections up to the size. A size over ``MAX_KB_FILE_BYTES`` is refused, which the table shows; the
``at the cap`` row is the largest file ingest accepts. The median of ``--runs`` runs is printed as one
Markdown table and written to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_persona import MEASURED, NOBODY, PY, in_turn, spread  # noqa: E402  (one way to measure a command)

from brain.features.ingest import MAX_KB_FILE_BYTES  # noqa: E402

WORDS = ("the a an of to in for on with by from at as is are was be can will should may must not and or but "
         "if when then so because scanner settings window overlap embedder chunk section receipt folder answer "
         "question model vector store server update prune report batch token limit heading topic file line error "
         "retry index memory assistant household password router printer invoice calendar reminder kitchen "
         "garden school doctor appointment insurance budget travel ticket passport language translation picture "
         "camera photo document table column reply message network backup disk upload download account login "
         "setting option default value person family friend weekend morning evening holiday birthday recipe "
         "shopping list library music playlist weather forecast temperature battery charger phone laptop screen "
         "keyboard paper letter address parcel delivery refund receipt warranty repair manual guide step first "
         "next last before after always never usually quickly carefully plainly kindly clearly").split()


def section(rng: random.Random, k: int) -> str:
    sentences = []
    for _ in range(rng.randint(5, 30)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        sentences.append(" ".join(words).capitalize() + ".")
    paragraphs = [" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)]
    return f"## Topic {k}: {rng.choice(WORDS)} {rng.choice(WORDS)}\n\n" + "\n\n".join(paragraphs) + "\n\n"


def knowledge_file(n_bytes: int, seed: int) -> str:
    """Markdown of whole sections, just under ``n_bytes`` (ASCII)."""
    rng = random.Random(seed)
    parts, size, k = [f"# Generated knowledge ({n_bytes:,} bytes)\n\n"], 0, 0
    size = len(parts[0])
    while True:
        part = section(rng, k)
        if size + len(part) > n_bytes:
            return "".join(parts)
        parts.append(part)
        size += len(part)
        k += 1


def env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OLLAMA_HOST": NOBODY, "BRAIN_SUMMARY_RETRIES": "0",
            "XDG_CONFIG_HOME": str(project / "xdg-config"), "XDG_DATA_HOME": str(project / "xdg-data")}


def ingest_once(project: Path, path: Path, run: int) -> dict:
    data = project / f"data-{path.stem}-{run}"
    cmd = [PY, "-c", MEASURED, PY, "-m", "brain.shells.cli", "--data-dir", str(data), "--json", "ingest", str(path)]
    done = subprocess.run(cmd, cwd=project, env=env(project), check=True, capture_output=True, text=True)
    result = json.loads(done.stdout)
    try:
        report = json.loads(result["stdout"])
    except ValueError:
        raise SystemExit(f"brain ingest {path.name} gave no report (exit {result['rc']}):\n{result['stderr']}")
    result["added"] = report.get("added", 0)
    result["refused"] = report.get("files_bad", 0) > 0
    if result["rc"] != 0 and not result["refused"]:
        raise SystemExit(f"brain ingest {path.name} failed:\n{result['stderr']}")
    return result


def largest_shipped() -> Path:
    return max((p for p in (ROOT / "config" / "kb").iterdir() if p.suffix == ".md"), key=lambda p: p.stat().st_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sizes", default="262144,4194304",
                        help="generated file sizes in bytes, comma separated (the cap is added)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "INGEST_CAP_RESULTS.md")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | {MAX_KB_FILE_BYTES})

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        shipped = largest_shipped()
        files = {f"largest shipped ({shipped.relative_to(ROOT)})": shipped}
        for n in sizes:
            path = project / f"kb-{n}.md"
            path.write_text(knowledge_file(n, seed=n), encoding="utf-8")
            files[("at the cap" if n == MAX_KB_FILE_BYTES else f"{n / 1024:,.0f} KiB") + " generated"] = path
        results = in_turn(files, args.runs, lambda path, run: ingest_once(project, path, run))
        sizes_of = {name: path.stat().st_size for name, path in files.items()}

    lines = [f"# One knowledge-base file ingested ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
             f"{os.cpu_count()} cores, median of {args.runs} run{'s' if args.runs > 1 else ''} of `brain ingest` in a "
             f"fresh data directory; cap {MAX_KB_FILE_BYTES:,} bytes)", "",
             "| file | bytes | documents | seconds (min-max) | peak RSS MiB (min-max) |", "|---|---|---|---|---|"]
    for name, runs in results.items():
        docs = "refused (over the cap)" if runs[0]["refused"] else f"{runs[0]['added']:,}"
        lines.append(f"| {name} | {sizes_of[name]:,} | {docs} | {spread(runs)} |")
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
