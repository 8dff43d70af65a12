#!/usr/bin/env bash
# The static checks, with the tools of ./.venv (scripts/setup.sh test installs them): ruff's lint rules and
# formatting, mypy ([tool.mypy] in pyproject.toml) and the layer contracts (lint-imports). Every check runs;
# the script exits non-zero when any failed, naming each failure and how to fix it.
# Usage: scripts/check.sh   (scripts/test.sh runs it before pytest)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
if [ ! -x "$bin/ruff" ] || [ ! -x "$bin/mypy" ]; then
    echo "error: ruff and mypy are not in .venv; run: bash scripts/setup.sh test" >&2
    exit 1
fi
failed=()

run() {  # run <name> <how to fix> <command...>
    local name="$1" fix="$2"
    shift 2
    echo "== $name" >&2
    if ! "$@"; then
        failed+=("$name: $fix")
    fi
}

run "ruff check" "fix what it lists (many with: $bin/ruff check --fix brain tests)" "$bin/ruff" check brain tests
run "ruff format" "run: $bin/ruff format brain" "$bin/ruff" format --check brain
run "mypy" "fix the type errors it lists (configuration: [tool.mypy] in pyproject.toml)" "$bin/mypy"
if [ -x "$bin/lint-imports" ]; then
    # --no-cache: the cache would land in the tree and may be stale after a branch switch
    run "lint-imports" "move the import it lists so that no layer imports a layer above it ([tool.importlinter])" \
        "$bin/lint-imports" --no-cache
else
    echo "== lint-imports: not installed, skipped (bash scripts/setup.sh test installs it)" >&2
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo >&2
    for failure in "${failed[@]}"; do
        echo "check failed: $failure" >&2
    done
    exit 1
fi
echo "all checks passed" >&2
