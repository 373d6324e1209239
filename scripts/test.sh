#!/usr/bin/env bash
# Set everything up, then run the linters and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "test: ruff"; .venv/bin/ruff check .
echo "test: mypy"; .venv/bin/mypy evo fitness mutators islands tests bench
bash scripts/test_services.sh  # PostgreSQL for tests/test_optuna_postgres.py; never fails
# one worker more than the CPUs (EVO_TEST_WORKERS): many tests wait on timeouts, subprocesses and Ray, and a third
# worker on 2 cores keeps them busy through those waits (two left them ~17% idle); a file's tests stay on one
# worker, the longest files start first (tests/scheduling.py)
workers="${EVO_TEST_WORKERS:-$(( $(nproc) + 1 ))}"
echo "test: pytest"; .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=25 "$@"
