#!/usr/bin/env bash
# Set up everything (see setup.sh), then run the main job: `tidemark demo` on a local table.
# Extra arguments go to `tidemark demo`, e.g. `scripts/demo.sh --path /tmp/trips --keep`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/tidemark demo "$@"
