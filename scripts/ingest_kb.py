#!/usr/bin/env python
"""Ingest knowledge-base files into the store: a thin shell over ``brain.ingest.ingest_paths``.

    .venv/bin/python scripts/ingest_kb.py config/kb [more paths] [--prune] [--dry-run] [--json]

Prints the report (or, with ``--json``, one JSON document) and exits 0 when every file was
ingested, 1 when any file failed (each failure names the file and line), 130 when interrupted
(re-running completes the work without duplicates). Progress goes to stderr: a bar on a terminal,
a line every few seconds otherwise. Settings (data dir, embedder, chunk window) come from the
environment and the project's ``.env`` and ``config/defaults.env``, as for the rest of brain
(:mod:`brain.config`), so the script gives the same result from any working directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brain.config import load_settings  # noqa: E402
from brain.errors import BrainError  # noqa: E402
from brain.ingest import ingest_paths  # noqa: E402
from brain.rag_store import RagStore  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories (searched recursively)")
    parser.add_argument("--prune", action="store_true", help="remove documents of files gone from the given directories")
    parser.add_argument("--dry-run", action="store_true", help="report what would change; write and embed nothing")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    args = parser.parse_args(argv)
    try:
        store = RagStore(load_settings())
        report = ingest_paths(store, args.paths, prune=args.prune, dry_run=args.dry_run, progress=True)
    except BrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; run the same command again to complete (nothing is duplicated)", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
