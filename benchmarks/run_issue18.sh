#!/usr/bin/env bash
# Every issue-18 measurement in one run, one after the other, on an otherwise idle machine:
#   1. Arrow engine vs delta-rs on the five shapes, 1M rows (bench_shapes.py --engines arrow)
#   1b. the floor under it: pyarrow alone writing the same Hudi files (bench_floor.py)
#   2. Spark engine vs plain Spark on the five shapes, 1M rows (bench_shapes.py --engines spark)
#   3. Spark engine at 5M rows, string keys and ten partitions (fmt-p10-narrow)
#   4. small commits and the memory of a 5M-row Arrow upsert (bench_small_commits.py); 4b. the
#      memory again with the system allocator as Arrow's memory pool
#   5-6. the commit critical section at 10 / 1,000 / 10,000 instants, without and with a
#      metadata table (bench_small_commits.py)
# Results go to OUT (default /tmp/tidemark-issue18): a Markdown fragment and a JSON file per
# part, and run.log with the load average before each part. Usage:
#   bash benchmarks/run_issue18.sh [OUT] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/tidemark-issue18}
REPEAT=${2:-3}
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH=$PWD/src PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PWD/$PY}
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] load $(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$OUT/run.log"; }

log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); commit $(git rev-parse --short HEAD)"
log "1. arrow vs delta-rs, 1M rows"
$PY benchmarks/bench_shapes.py --engines arrow --rows 1000000 --repeat "$REPEAT" --work-dir "$OUT/w-arrow" \
    --out "$OUT/arrow.md" --json "$OUT/arrow.json" >>"$OUT/run.log" 2>&1
rm -rf "$OUT/w-arrow"
log "1b. the floor under the Arrow engine: pyarrow writing the same Hudi files alone, beside tidemark and delta-rs"
mkdir -p "$OUT/w-floor"
$PY benchmarks/bench_floor.py --rows 1000000 --repeat "$REPEAT" --work-dir "$OUT/w-floor" \
    --out "$OUT/floor.md" --json "$OUT/floor.json" >>"$OUT/run.log" 2>&1
rm -rf "$OUT/w-floor"
log "2. spark vs plain Spark, 1M rows"
$PY benchmarks/bench_shapes.py --engines spark --rows 1000000 --repeat "$REPEAT" --work-dir "$OUT/w-spark" \
    --out "$OUT/spark.md" --json "$OUT/spark.json" >>"$OUT/run.log" 2>&1
rm -rf "$OUT/w-spark"
log "3. spark vs plain Spark, 5M rows, fmt-p10-narrow"
$PY benchmarks/bench_shapes.py --engines spark --rows 5000000 --repeat 1 --shapes fmt-p10-narrow \
    --work-dir "$OUT/w-spark5" --out "$OUT/spark5m.md" --json "$OUT/spark5m.json" >>"$OUT/run.log" 2>&1
rm -rf "$OUT/w-spark5"
log "4. small commits (a new table's default: with a metadata table) and the memory of a 5M-row upsert"
$PY benchmarks/bench_small_commits.py --skip critical --commits 50 --repeat "$REPEAT" \
    --memory-rows 5000000 --json "$OUT/small_commits.json" >>"$OUT/run.log" 2>&1
log "4b. the same 5M-row upsert's memory with the system allocator as Arrow's pool (pyarrow's default, mimalloc, keeps freed pages)"
ARROW_DEFAULT_MEMORY_POOL=system $PY benchmarks/bench_small_commits.py --skip small critical --repeat "$REPEAT" \
    --memory-rows 5000000 --json "$OUT/memory_system_pool.json" >>"$OUT/run.log" 2>&1
log "5. the critical section at 10 / 1,000 / 10,000 instants, archival off and on, without a metadata table"
$PY benchmarks/bench_small_commits.py --skip small memory --commits 50 --repeat 1 --sizes 10 1000 10000 \
    --archival both --archive-every 500 --metadata off --json "$OUT/critical.json" >>"$OUT/run.log" 2>&1
log "6. the critical section with a metadata table at 10 / 1,000 / 10,000 instants (a fresh table per size)"
$PY benchmarks/bench_small_commits.py --skip small memory --commits 50 --repeat 1 --sizes 10 1000 10000 \
    --archival on --archive-every 500 --metadata on --json "$OUT/critical_mdt.json" >>"$OUT/run.log" 2>&1
log "done"
