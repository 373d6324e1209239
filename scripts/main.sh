#!/usr/bin/env bash
# The main job: set everything up, then run the quick CPU demo campaign (configs/demo.yaml).
# Extra arguments go to `evo run` (e.g. --output DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m evo run configs/demo.yaml "$@"
