#!/usr/bin/env bash
# Set everything up, then run the linters and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "test: ruff"; .venv/bin/ruff check .
echo "test: mypy"; .venv/bin/mypy evo fitness mutators islands tests bench
bash scripts/test_services.sh  # PostgreSQL for tests/test_optuna_postgres.py; never fails
echo "test: pytest"; .venv/bin/python -m pytest -q --durations=25 "$@"
