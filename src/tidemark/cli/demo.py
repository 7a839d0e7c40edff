"""``tidemark demo``: create a table, write to it in every way, and check it with hudi-rs."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import CliUsageError, HelpFormatter, Ui, count, seconds
from tidemark.cli.timeline import print_timeline
from tidemark.table import CommitResult, Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_ROWS = 2_000
MIN_ROWS = 100

DESCRIPTION = """\
Run the tidemark demo: start a local SparkSession, create a copy-on-write Hudi
table of taxi trips (record key trip_id, partitioned by city, newest ts wins),
write to it in every way tidemark supports, then read it back and check it
with hudi-rs (the `hudi` Python package), an independent Hudi reader.

The story:
  1. bulk_insert      the initial load of --rows trips
  2. upsert           tips added to some trips (updates) plus new trips (inserts)
  3. delete           cancelled trips removed by key
  4. insert_overwrite the "la" partition replaced by a corrected re-import
  then four writers take turns on the same table:
  5. ingest           upsert of newly arrived trips
  6. correction       upsert of fixed fares
  7. GDPR delete      every trip of one rider, found by reading the table
  8. backfill         insert of late-arriving trips of a new city

The writers run one after another in this one process. Writing from several
processes at the same time needs multi-writer concurrency control, which is
not implemented yet (hoodie.write.concurrency.mode is single_writer).

After each write its result is printed: operation, instant time, records
inserted/updated/deleted and files written. At the end come the timeline,
the row counts per city, and the check: tidemark's rows must match the rows
the demo expects and the rows hudi-rs reads (count and key set). The exit
code is 1 if they do not.

Spark runs as local[2] with its UI off. The first write takes a few seconds
longer while the JVM warms up.
"""

EPILOG = """\
examples:
  tidemark demo
      run it in a fresh temporary folder, removed at the end
  tidemark demo --keep
      keep the temporary table, then look at it:
      tidemark timeline <printed path>; tidemark show <printed path>
  tidemark demo --path /tmp/trips --rows 10000
      a bigger table in /tmp/trips (a new or empty folder; it is kept)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo",
        help="create a table, write to it in every way, verify it with hudi-rs",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--path", metavar="DIR",
        help="create the table in DIR, a new or empty folder, and keep it "
        "(default: a fresh temporary folder, printed at the start)",
    )
    parser.add_argument(
        "--rows", metavar="N", type=int, default=DEFAULT_ROWS,
        help=f"trips in the initial load; the other batches are sized from it "
        f"(default: {count(DEFAULT_ROWS)}, at least {MIN_ROWS})",
    )
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the temporary table after the demo (a table at --path is always kept)",
    )
    parser.set_defaults(run=run)


# -- the data --------------------------------------------------------------------------

SCHEMA = "trip_id string, city string, rider string, fare double, distance_km double, ts long"
CITIES = ("sf", "nyc", "la", "chi")
OVERWRITTEN_CITY = "la"
BACKFILL_CITY = "sea"
START_TS = 1_767_225_600  # 2026-01-01T00:00:00Z, in seconds

Row = tuple[str, str, str, float, float, int]


@dataclass
class Trips:
    """Makes trips, and keeps the rows the table should hold after each write."""

    rng: random.Random = field(default_factory=lambda: random.Random(7))
    next_id: int = 0
    expected: dict[str, Row] = field(default_factory=dict)

    def new(self, n: int, city: str | None = None, ts_offset: int = 0) -> list[Row]:
        rows = []
        for _ in range(n):
            i = self.next_id
            self.next_id += 1
            distance = round(self.rng.uniform(0.5, 30.0), 2)
            rows.append((
                f"trip-{i:07d}",
                city or self.rng.choice(CITIES),
                f"rider-{self.rng.randrange(1, 201):03d}",
                round(3.0 + distance * 2.1, 2),
                distance,
                START_TS + ts_offset + i,
            ))
        return rows

    def pick(self, n: int, *, exclude_city: str | None = None) -> list[Row]:
        pool = sorted(k for k, r in self.expected.items() if r[1] != exclude_city)
        return [self.expected[k] for k in self.rng.sample(pool, min(n, len(pool)))]

    def upserted(self, rows: Iterable[Row]) -> None:
        for row in rows:
            self.expected[row[0]] = row

    def deleted(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.expected.pop(key, None)

    def overwritten(self, city: str, rows: Iterable[Row]) -> None:
        self.expected = {k: r for k, r in self.expected.items() if r[1] != city}
        self.upserted(rows)


def _later(row: Row, *, fare: float) -> Row:
    """The same trip with a new fare and a newer ts, so it wins the merge."""
    return (row[0], row[1], row[2], fare, row[4], row[5] + 1_000_000)


# -- Spark -----------------------------------------------------------------------------

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark's gateway logger: at the root level, Spark skips its "Setting default log level" note.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def start_spark(scratch: str) -> tuple[SparkSession, bool]:
    """The active SparkSession if there is one, else a new local one. Second: whether we made it."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ["PYSPARK_PYTHON"] = sys.executable
    log4j = os.path.join(scratch, "log4j2.properties")
    with open(log4j, "w") as fh:
        fh.write(_LOG4J)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidemark-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        # Quiet from the first line: setLogLevel only applies once the JVM is up.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


# -- the story -------------------------------------------------------------------------


@dataclass
class Story:
    ui: Ui
    spark: SparkSession
    table: Table
    trips: Trips
    step: int = 0

    def frame(self, rows: list[Row]) -> DataFrame:
        return self.spark.createDataFrame(rows, SCHEMA)

    def write(
        self,
        who: str,
        what: str,
        op: Callable[[DataFrame], CommitResult],
        rows: list[Row] | DataFrame,
        *,
        after: Callable[[], None],
    ) -> CommitResult:
        self.step += 1
        started = time.monotonic()
        with self.ui.out.status(f"{self.step}. [{escape(who)}] {escape(what)}…"):
            result = op(self.frame(rows) if isinstance(rows, list) else rows)
        after()
        self.ui.out.print(f"{self.ui.check} {self.step}. [bold]{escape(who)}[/]: {escape(what)}")
        self.ui.out.print("     " + result_line(result, time.monotonic() - started))
        return result


def result_line(result: CommitResult, took: float) -> str:
    return (
        f"{result.operation:<16} instant {result.instant_time}  "
        f"+{count(result.num_inserts)} ~{count(result.num_updates)} -{count(result.num_deletes)}  "
        f"{result.num_files} file{'s' if result.num_files != 1 else ''}  {seconds(took)}"
    )


def tell(story: Story, rows: int) -> None:
    trips, table, ui = story.trips, story.table, story.ui
    small = max(rows // 20, 5)

    ui.out.print()
    ui.out.print("[bold]The basics: one table, every write operation[/]")
    batch = trips.new(rows)
    story.write("bulk_insert", f"the initial load of {count(rows)} trips",
                table.bulk_insert, batch, after=lambda: trips.upserted(batch))

    tipped = [_later(r, fare=round(r[3] + 2.5, 2)) for r in trips.pick(rows // 10)]
    arrivals = trips.new(small)
    mixed = tipped + arrivals
    story.write("upsert", f"{count(len(tipped))} trips get a tip, {count(len(arrivals))} new trips",
                table.upsert, mixed, after=lambda: trips.upserted(mixed))

    cancelled = trips.pick(max(rows // 50, 2))
    story.write("delete", f"{count(len(cancelled))} cancelled trips, by key",
                table.delete, cancelled, after=lambda: trips.deleted(r[0] for r in cancelled))

    reimport = trips.new(rows // 8, city=OVERWRITTEN_CITY)
    story.write(
        "insert_overwrite",
        f"city={OVERWRITTEN_CITY} replaced by a re-import of {count(len(reimport))} trips",
        table.insert_overwrite,
        reimport,
        after=lambda: trips.overwritten(OVERWRITTEN_CITY, reimport),
    )

    ui.out.print()
    ui.out.print("[bold]Writers taking turns[/]")
    ui.out.print(
        "[dim]These writers run one after another in this process. Writing at the same time "
        "from several processes needs multi-writer concurrency control: not implemented yet.[/]"
    )
    fresh = trips.new(rows // 10)
    story.write("ingest", f"upsert {count(len(fresh))} newly arrived trips",
                table.upsert, fresh, after=lambda: trips.upserted(fresh))

    fixed = [
        _later(r, fare=round(r[3] * 0.9, 2))
        for r in trips.pick(small, exclude_city=OVERWRITTEN_CITY)
    ]
    story.write("correction", f"upsert {count(len(fixed))} corrected fares",
                table.upsert, fixed, after=lambda: trips.upserted(fixed))

    trips_per_rider = Counter(r[2] for r in trips.expected.values())
    rider = max(trips_per_rider, key=lambda name: (trips_per_rider[name], name))
    from pyspark.sql import functions as F

    found = [
        (r["trip_id"], r["city"]) for r in
        table.read().filter(F.col("rider") == rider).select("trip_id", "city").collect()
    ]
    erased = story.spark.createDataFrame(found, "trip_id string, city string")
    story.write("GDPR delete", f"delete the {count(len(found))} trips of {rider}, found by a read",
                table.delete, erased, after=lambda: trips.deleted(key for key, _ in found))

    late = trips.new(rows // 10, city=BACKFILL_CITY, ts_offset=-10_000_000)
    story.write("backfill", f"insert {count(len(late))} late trips of a new city={BACKFILL_CITY}",
                table.insert, late, after=lambda: trips.upserted(late))


# -- checks ----------------------------------------------------------------------------


def _diff(name: str, got: set[str], want: set[str]) -> str:
    missing, extra = sorted(want - got), sorted(got - want)
    parts = []
    if missing:
        parts.append(f"{len(missing)} key(s) missing, e.g. {', '.join(missing[:3])}")
    if extra:
        parts.append(f"{len(extra)} unexpected key(s), e.g. {', '.join(extra[:3])}")
    return f"{name}: " + "; ".join(parts)


def read_with_hudi_rs(path: str) -> tuple[int, list[str]]:
    """Row count and trip ids as hudi-rs reads the table. Raises ImportError without it."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    hudi_table = HudiTableBuilder.from_base_uri(os.path.abspath(path)).build()
    batches = hudi_table.read(HudiReadOptions())
    if not batches:
        return 0, []
    data = pa.Table.from_batches(batches)
    return data.num_rows, [str(k) for k in data.column("trip_id").to_pylist()]


def verify(ui: Ui, table: Table, trips: Trips) -> bool:
    df = table.read()
    keys = [r["trip_id"] for r in df.select("trip_id").collect()]
    want = set(trips.expected)
    per_city = {r["city"]: r["count"] for r in df.groupBy("city").count().collect()}

    grid = RichTable(
        title="rows per city", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    grid.add_column("city")
    grid.add_column("rows", justify="right")
    for city in sorted(per_city):
        grid.add_row(Text(str(city)), count(per_city[city]))
    grid.add_row("[bold]total[/]", f"[bold]{count(len(keys))}[/]")
    ui.out.print(grid)

    ok = True
    if len(keys) != len(set(keys)) or set(keys) != want:
        dupes = len(keys) - len(set(keys))
        detail = _diff("tidemark", set(keys), want)
        if dupes:
            detail += f"; {dupes} duplicate key(s)"
        ui.err.print(
            f"[red]error:[/] tidemark's read does not match the expected {count(len(want))} "
            f"rows: {escape(detail)}", soft_wrap=True,
        )
        ok = False
    else:
        ui.out.print(f"{ui.check} tidemark reads the expected {count(len(want))} rows")

    try:
        hudi_rows, hudi_keys = read_with_hudi_rs(table.path)
    except ImportError:
        ui.err.print("[yellow]warning:[/] hudi-rs is not installed (pip install hudi); "
                     "skipped the independent check", soft_wrap=True)
        return ok
    if hudi_rows == len(keys) and set(hudi_keys) == set(keys):
        ui.out.print(f"{ui.check} hudi-rs agrees: {count(hudi_rows)} rows")
    else:
        detail = _diff("hudi-rs", set(hudi_keys), set(keys))
        ui.err.print(
            f"[red]error:[/] hudi-rs disagrees: it reads {count(hudi_rows)} rows, tidemark "
            f"{count(len(keys))}; {escape(detail)}", soft_wrap=True,
        )
        ok = False
    return ok


# -- the command -----------------------------------------------------------------------


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
        ui.out.print(f"[bold]tidemark demo[/]: a copy-on-write Hudi table at {escape(table_path)}")
        with ui.out.status("starting Spark (local[2])…"):
            spark, owned = start_spark(scratch)
        ui.out.print(f"{ui.check} Spark {spark.version} ready "
                     f"({seconds(time.monotonic() - began)})")
        written = time.monotonic()
        table = Table.create(
            table_path, spark=spark, record_key="trip_id", partition_by="city",
            ordering_field="ts", options={"hoodie.table.name": "trips"},
        )
        ui.out.print(f"{ui.check} created table trips: record key trip_id, partitioned by city, "
                     "ordering field ts (the newest ts wins)")
        story = Story(ui, spark, table, Trips())
        tell(story, args.rows)
        ui.out.print()
        print_timeline(ui, table, title="timeline")
        ui.out.print()
        ok = verify(ui, table, story.trips)
        ui.out.print(
            f"{story.step} writes and the checks took {seconds(time.monotonic() - written)} "
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
