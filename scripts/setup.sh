#!/usr/bin/env bash
# Create ./.venv (Python >= 3.11) and install brain into it; quick when nothing changed.
# Usage: scripts/setup.sh [extra]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
python_bin="${PYTHON:-python3}"
if ! "$python_bin" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: brain needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$python_bin" -m venv .venv
fi
stamp=".venv/.brain-installed${extra:+-$extra}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    spec="."
    [ -n "$extra" ] && spec=".[$extra]"
    echo "Installing brain${extra:+ with [$extra]} into .venv, a minute or two the first time (log: .venv/install.log) ..." >&2
    # one line per package fetched, so a first run shows it is moving; the whole output goes to the log
    if ! { export PYTHONUNBUFFERED=1; .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install --progress-bar off -e "$spec"; } \
            2>&1 | tee .venv/install.log | { grep --line-buffered -E '^(Collecting|Successfully installed)' || true; } \
            | sed -u -e 's/^Collecting /  fetching /' -e 's/^Successfully installed .*/  installed/' >&2; then
        tail -n 40 .venv/install.log >&2
        echo "error: installing brain failed; the full log is .venv/install.log" >&2
        exit 1
    fi
    touch "$stamp"
fi
# the browser tests drive Debian's Chromium (no browser downloads): install it where we can, quietly; without
# it those tests skip with one line, so this never fails the setup
install_chromium() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }
if [ "$extra" = "test" ] && [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's chromium for the browser tests (log: .venv/chromium.log) ..." >&2
    { install_chromium || { apt-get update && install_chromium; }; } > .venv/chromium.log 2>&1 \
        || echo "note: chromium could not be installed (see .venv/chromium.log); the browser tests will skip" >&2
fi
