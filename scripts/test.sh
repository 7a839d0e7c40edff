#!/usr/bin/env bash
# Set up everything (see setup.sh), then lint, type-check and run the test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k model -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
echo "[test] ruff" >&2
.venv/bin/ruff check src tests benchmarks examples
echo "[test] mypy" >&2
.venv/bin/mypy
echo "[test] pytest" >&2
exec .venv/bin/python -m pytest "$@"
