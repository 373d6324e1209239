#!/usr/bin/env bash
# Wheels for running bench/device/device_check.py on the lent GPU machine, whose image has torch, triton,
# numpy, msgpack, pyyaml, rich, httpx and tqdm but not this project's other dependencies (see
# /work/.library/device/KINDS.md). Downloads them, pinned as constraints.txt pins them, for that
# image's Python (3.12, manylinux x86_64) into .whl/ (git-ignored; carried with `carry: [".whl"]`).
# On the device machine, before the script:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site:.
#   PYTHONUNBUFFERED=1 python3 bench/device/device_check.py "$OUT/device" --steps a,b --budget-s 420
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
NAMES=(pydantic pydantic_core annotated-types typing-inspection typing_extensions deap optuna alembic SQLAlchemy
       Mako colorlog openai jiter sniffio httpx2 httpcore2 truststore h11 anyio)
pins=()
for name in "${NAMES[@]}"; do
    pin=$(grep -i -E "^${name//[-_]/[-_]}==" constraints.txt || true)
    [ -n "$pin" ] || { echo "device_wheels: $name is not pinned in constraints.txt" >&2; exit 1; }
    pins+=("$pin")
done
rm -rf .whl && mkdir -p .whl
platforms=()
for n in 17 24 27 28 31 34 35 39; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${pins[@]}"
ls .whl
du -sh .whl
