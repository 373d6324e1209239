#!/usr/bin/env bash
# Create .venv in the repository root and install the project with the pinned dev environment.
# Idempotent: a second run with unchanged pyproject.toml and constraints.txt installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.evo-installed 2>/dev/null)" != "$stamp" ]; then
    echo "setup: installing dependencies (pinned by constraints.txt)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
    echo "$stamp" > .venv/.evo-installed
fi
