#!/usr/bin/env bash
# Set up, run the static checks (scripts/check.sh), then the tests on every core (real Chroma, the real local
# embedder).
#   scripts/test.sh           the fast tier: everything not marked `slow` (a few minutes on two cores)
#   scripts/test.sh --all     every tier: also a real `chroma run` server, subprocesses and kill -9, the browser,
#                             stress, fuzzing and the model tier, a real llama.cpp server (what .ci/run calls)
#   scripts/test.sh -m model  the model tier alone (tests/llm/: summaries, formation and the proxy, real models)
# Other arguments go to pytest, e.g. `scripts/test.sh tests/store/test_store.py -x` or `scripts/test.sh --all -n 0`.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-m "not slow")
args=()
for arg in "$@"; do
    if [ "$arg" = "--all" ]; then tier=(); else args+=("$arg"); fi
done
bash scripts/setup.sh test
# lint, format, types and layers first: quicker than the tests, and they catch what no test reports
bash scripts/check.sh
# modules stay on one worker (--dist loadscope), so a module's expensive fixtures are built once
exec .venv/bin/python -m pytest -n auto --dist loadscope "${tier[@]}" "${args[@]}"
