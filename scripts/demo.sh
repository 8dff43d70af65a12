#!/usr/bin/env bash
# Set up and run the main job on the embedded default store under ./data/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m brain.shells.demo "$@"
