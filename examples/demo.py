"""The tidemark demo: four writers on one table at the same time, checked by hudi-rs.

An example of using tidemark, not part of the package. Run it with
``python examples/demo.py [--multi-stream] [--path DIR] [--keep]``, with
``scripts/demo.sh`` (which sets everything up first), or as ``tidemark demo`` from a
source checkout. It needs the ``spark`` extra (PySpark) and, for the independent
check, the ``test`` extra (hudi-rs): ``pip install -e '.[spark,test]'``.

The stories live in :mod:`multi_writer_demo` (four writers, optimistic concurrency
control) and :mod:`multi_stream_demo` (two column-group streams, non-blocking
concurrency control); this module holds the command around them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import multi_stream_demo
import multi_writer_demo
from multi_writer_demo import DEFAULT_ROWS, MIN_ROWS
from rich.markup import escape

from tidemark.cli.output import CliUsageError, Ui, count, seconds
from tidemark.engines.spark.session import start_spark
from tidemark.table import Table

HELP = "four concurrent writers on one table with Spark, verified with hudi-rs"

DESCRIPTION = """\
Run the tidemark demo: start a local SparkSession, create a copy-on-write Hudi
table of taxi trips (record key trip_id, partitioned by city, newest ts wins),
load it with bulk_insert, then let four writers write to it AT THE SAME TIME,
each with its own Table object and optimistic concurrency control:

  ingest       upserts of newly arrived trips (2 commits), into new file
               groups (hoodie.parquet.small.file.limit=0)
  correction   upserts of corrected fares of existing trips (2 commits)
  GDPR delete  deletes every trip of one rider, found by a read (2 commits)
  backfill     insert_overwrite of the city=la partition with a corrected
               re-import, then an insert of late-arriving la trips

The writers are threads of this one process sharing the SparkSession (Spark
runs jobs from several threads at once). They take the table lock only for
the short steps that need it (starting an instant, committing) and write
their files in parallel. At commit each write checks whether a write that
completed since it began touched the same file groups; if so it lost the
conflict: it is rolled back and run again with a new instant. Such a commit
shows "attempts 2" or more. Here correction and GDPR delete rewrite the same
existing file groups, so they usually conflict; ingest (new file groups
only) never does, nor does backfill (city=la) unless an erased rider has
trips there.

As each commit completes a line is printed: the time since the writers
started, the writer, the operation, the instant's requested and completion
times, records inserted/updated/deleted, and the attempts. Lost conflicts are
printed as they happen too. Then come the timeline (with which commits ran
concurrently), a chart of the writers over time, and the check: the table,
read by tidemark and by hudi-rs (the `hudi` Python package, an independent
Hudi reader), must hold exactly the rows the demo computes in Python. The
writers touch disjoint records, so the expected rows do not depend on the
order in which they commit. The exit code is 1 if the check fails.

Spark runs as local[2] with its UI off and the FAIR scheduler (unless a
SparkSession is already active, which is then used as it is).
"""

EPILOG = """\
examples:
  tidemark demo
      run it in a fresh temporary folder, removed at the end
  tidemark demo --keep
      keep the temporary table, then look at it:
      tidemark timeline <printed path>; tidemark show <printed path>
  tidemark demo --writers-mode sequential
      the same writes, one writer after another: no overlap, no conflicts
  tidemark demo --path /tmp/trips --rows 10000
      a bigger table in /tmp/trips (a new or empty folder; it is kept)
  tidemark demo --multi-stream
      the lock-free multi-stream join: a "fares" stream and a "status" stream
      write their own columns of one merge-on-read table at the same time with
      non_blocking_concurrency_control; readers merge per column group (the
      latest fare and the latest status of every trip, whatever the arrival
      order); a compactor runs meanwhile; no write ever aborts

The demo is examples/demo.py of the source repository (tidemark demo runs it
from a checkout); python examples/demo.py and scripts/demo.sh take the same
arguments.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's arguments (``tidemark demo`` and ``python examples/demo.py`` take the same)."""
    parser.add_argument(
        "--path", metavar="DIR",
        help="create the table in DIR, a new or empty folder, and keep it "
        "(default: a fresh temporary folder, printed at the start)",
    )
    parser.add_argument(
        "--rows", metavar="N", type=int, default=DEFAULT_ROWS,
        help=f"trips in the initial load; the writers' batches are sized from it "
        f"(default: {count(DEFAULT_ROWS)}, at least {MIN_ROWS})",
    )
    parser.add_argument(
        "--writers-mode", choices=("threads", "sequential"), default="threads", dest="writers_mode",
        help="threads: the four writers run at the same time (default); "
        "sequential: one after another",
    )
    parser.add_argument(
        "--multi-stream", action="store_true", dest="multi_stream",
        help="run the multi-stream join instead: two Spark writers each update their own column group of "
        "one wide merge-on-read table (non-blocking concurrency control, events out of order) while a "
        "compactor runs; --rows is then the number of trips",
    )
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the temporary table after the demo (a table at --path is always kept)",
    )


def run(args: argparse.Namespace, ui: Ui) -> int:
    if args.rows < MIN_ROWS:
        raise CliUsageError(f"--rows must be at least {MIN_ROWS}, got {args.rows}")
    if args.path and os.path.exists(args.path) and (
        not os.path.isdir(args.path) or os.listdir(args.path)
    ):
        raise CliUsageError(f"--path {args.path!r} must be a new or empty folder")

    scratch = tempfile.mkdtemp(prefix="tidemark-demo-")
    table_path = os.path.abspath(args.path) if args.path else os.path.join(scratch, "trips")
    ok = False
    owned = False
    spark: Any = None
    began = time.monotonic()
    try:
        kind = "a merge-on-read multi-stream" if args.multi_stream else "a copy-on-write"
        ui.out.print(f"[bold]tidemark demo[/]: {kind} Hudi table at {escape(table_path)}")
        with ui.out.status("starting Spark (local[2])…"):
            spark, owned = start_spark(scratch, app_name="tidemark-demo")
        fair = spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO").upper() == "FAIR"
        ui.out.print(f"{ui.check} Spark {spark.version} ready "
                     f"({seconds(time.monotonic() - began)}, {'FAIR' if fair else 'FIFO'} scheduler)")
        written = time.monotonic()
        if args.multi_stream:
            ok, commits = multi_stream_demo.tell(ui, spark, table_path, args.rows)
        else:
            table = Table.create(
                table_path, spark=spark, record_key="trip_id", partition_by="city",
                ordering_field="ts", options={"hoodie.table.name": "trips", **multi_writer_demo.OCC},
            )
            ui.out.print(f"{ui.check} created table trips: record key trip_id, partitioned by city, "
                         "ordering field ts (the newest ts wins)")
            try:
                ok, commits = multi_writer_demo.tell(ui, spark, table, args.rows, args.writers_mode == "threads", fair)
            finally:
                table.close()
        ui.out.print(
            f"{commits} commits and the checks took {seconds(time.monotonic() - written)} "
            f"(after {seconds(written - began)} to start Spark)"
        )
    finally:
        if owned and spark is not None:
            spark.stop()
        log4j = os.path.join(scratch, "log4j2.properties")
        if os.path.exists(log4j):
            os.remove(log4j)
        # A table at --path is the user's; a failed demo's table is kept to look at.
        keep = bool(args.path) or args.keep or not ok
        if args.path or not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        if keep and os.path.exists(os.path.join(table_path, ".hoodie")):
            ui.out.print(f"the table is kept at {escape(table_path)}; look at it with:")
            ui.out.print(f"  tidemark timeline {escape(table_path)}")
            ui.out.print(f"  tidemark show {escape(table_path)} --no-meta")
        elif not keep:
            ui.out.print("removed the temporary table (--keep keeps it)")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python examples/demo.py ARGS``: the same as ``tidemark demo ARGS`` (same exit codes)."""
    from tidemark.cli.main import main as tidemark

    return tidemark(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
