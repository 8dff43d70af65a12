#!/usr/bin/env bash
# Set up and run the whole test suite (real Chroma, a real `chroma run` server, the real local embedder).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
