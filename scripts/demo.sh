#!/usr/bin/env bash
# Set up everything (see setup.sh), then run the main job: the demo (examples/demo.py, the
# same as `tidemark demo`) on a local table. Extra arguments go to the demo, e.g.
# `scripts/demo.sh --path /tmp/trips --keep` or `scripts/demo.sh --multi-stream`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python examples/demo.py "$@"
