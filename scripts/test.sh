#!/usr/bin/env bash
# Set everything up, then run the linters and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "test: ruff"; .venv/bin/ruff check .
echo "test: mypy"; .venv/bin/mypy evo fitness mutators islands tests bench
bash scripts/test_services.sh  # PostgreSQL for tests/test_optuna_postgres.py; never fails
# two workers (EVO_TEST_WORKERS): many tests wait on subprocesses and Ray; a file's tests stay on one worker, the
# longest files start first (tests/scheduling.py)
echo "test: pytest"; .venv/bin/python -m pytest -q -n "${EVO_TEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
