"""Write config/defaults.env and the docs site's settings table from brain/config's Settings.

    python scripts/gen_config_docs.py          # rewrite both files
    python scripts/gen_config_docs.py --check  # exit 1, naming the stale files, when they differ
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.config.docs import render_defaults_env, update_readme

DEFAULTS_ENV = ROOT / "config" / "defaults.env"
#: the settings reference page of the docs site, which holds the generated table
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    wanted = {DEFAULTS_ENV: render_defaults_env(),
              SETTINGS_PAGE: update_readme(SETTINGS_PAGE.read_text(encoding="utf-8"))}
    stale = [path for path, text in wanted.items() if path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python scripts/gen_config_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
