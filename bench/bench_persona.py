#!/usr/bin/env python
"""What the largest persona brain accepts costs at start-up: `brain init` with the shipped persona vs a
persona at the cap, each in a fresh data directory.

    .venv/bin/python bench/bench_persona.py [--runs 3] [--out bench/PERSONA_RESULTS.md]

Every figure is a whole new `brain init` process (a fresh data directory each time, so the persona is
split, embedded and written), timed from spawn to exit; its peak RSS is the child's ``ru_maxrss``
(``resource.getrusage(RUSAGE_CHILDREN)``, read by a small parent process that runs only that child).
Personas at the cap: ``sections``, as many ~1 KB sections as fit in ``MAX_PERSONA_BYTES`` (at most
``MAX_PERSONA_SECTIONS``), and ``one section``, one section of ``MAX_PERSONA_BYTES`` of prose.
The median of ``--runs`` runs is printed as one Markdown table and written to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from brain.features.persona import MAX_PERSONA_BYTES, MAX_PERSONA_SECTIONS  # noqa: E402

PY = sys.executable
NOBODY = "http://127.0.0.1:9"  # nothing answers there: no summariser or Ollama embedder is reached
# runs one command and reports its wall time and peak RSS (KiB on Linux), and only its own (bench_ingest_cap.py
# measures with it too)
MEASURED = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
print(json.dumps({"rc": done.returncode, "seconds": seconds, "stdout": done.stdout[-4000:],
                  "stderr": done.stderr[-2000:], "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""
WORDS = ("the assistant answers plainly and kindly, keeps to what it knows, asks when a request is unclear, "
         "and never invents facts about the people it talks to; ").split()


def prose(n_bytes: int, seed: int) -> str:
    """About ``n_bytes`` of varied English-like text (ASCII), under ``n_bytes``."""
    out, size, i = [], 0, seed
    while True:
        word = WORDS[(i * 7 + i // len(WORDS)) % len(WORDS)]
        if size + len(word) + 1 > n_bytes:
            return " ".join(out)
        out.append(word)
        size += len(word) + 1
        i += 1


def persona_of_sections(limit: int) -> str:
    head = "name: Brain\n\nYou are Brain, the assistant of this bench.\n"
    body = limit - len(head) - 64
    n = min(MAX_PERSONA_SECTIONS - 1, max(1, body // 1024))
    each = body // n
    parts = [head]
    for k in range(n):
        title = f"\n## Section {k}\n\n"
        parts.append(title + prose(each - len(title) - 1, k) + "\n")
    text = "".join(parts)
    assert len(text.encode("utf-8")) <= limit, len(text)
    return text


def persona_of_one_section(limit: int) -> str:
    head = "name: Brain\n\n"
    return head + prose(limit - len(head) - 1, 0) + "\n"


def env(project: Path, persona: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OLLAMA_HOST": NOBODY, "BRAIN_SUMMARY_RETRIES": "0",
            "XDG_CONFIG_HOME": str(project / "xdg-config"), "XDG_DATA_HOME": str(project / "xdg-data"),
            "BRAIN_PERSONA_PATH": str(persona)}


def init_once(project: Path, persona: Path, run: int) -> dict:
    data = project / f"data-{persona.stem}-{run}"
    cmd = [PY, "-c", MEASURED, PY, "-m", "brain.shells.cli", "--data-dir", str(data), "init"]
    done = subprocess.run(cmd, cwd=project, env=env(project, persona), check=True, capture_output=True, text=True)
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"brain init failed with {persona.name}:\n{result['stderr']}")
    return result


def in_turn(cases: dict[str, Path], runs: int, measure) -> dict[str, list[dict]]:
    """``measure(path, run)`` of every case, ``runs`` rounds in turn, so a busy machine slows every case alike."""
    results: dict[str, list[dict]] = {name: [] for name in cases}
    for run in range(runs):
        for name, path in cases.items():
            results[name].append(measure(path, run))
            print(f"{name}: {results[name][-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    return results


def spread(runs: list[dict]) -> str:
    """The table cells of several runs: median seconds (min-max) | median peak RSS MiB (min-max)."""
    seconds = [r["seconds"] for r in runs]
    mib = [r["peak_kib"] / 1024 for r in runs]
    return (f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f}) | "
            f"{statistics.median(mib):.0f} ({min(mib):.0f}-{max(mib):.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "PERSONA_RESULTS.md")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        personas = {"shipped persona.md": ROOT / "persona.md"}
        for name, make in (("sections", persona_of_sections), ("one-section", persona_of_one_section)):
            path = project / f"persona-{name}.md"
            path.write_text(make(MAX_PERSONA_BYTES), encoding="utf-8")
            personas[f"at the cap, {name.replace('-', ' ')}"] = path
        results = in_turn(personas, args.runs, lambda path, run: init_once(project, path, run))
        sizes = {name: path.stat().st_size for name, path in personas.items()}

    lines = [f"# Persona at start-up ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
             f"{os.cpu_count()} cores, median of {args.runs} runs of `brain init` in a fresh data directory; "
             f"cap {MAX_PERSONA_BYTES:,} bytes)", "",
             "| persona | bytes | seconds (min-max) | peak RSS MiB (min-max) |", "|---|---|---|---|"]
    for name, runs in results.items():
        lines.append(f"| {name} | {sizes[name]:,} | {spread(runs)} |")
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
