#!/usr/bin/env bash
# The main job: validate every shipped task and evaluate its seed candidate.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for task in $(ls tasks/*/task.py | xargs -n1 dirname | xargs -n1 basename); do
    cfg=configs/$task.yaml
    .venv/bin/python -m evo check "$cfg"
    .venv/bin/python -m evo eval "$cfg" --candidate "tasks/$task/seed.py"
done
