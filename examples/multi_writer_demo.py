"""The multi-writer story of the demo (``examples/demo.py``): four writers on one table at
the same time, each with its own Table and optimistic concurrency control, checked by
hudi-rs. Also the chart and the hudi-rs check that the multi-stream story reuses."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import Ui, count, seconds
from tidemark.cli.timeline import print_timeline
from tidemark.errors import TidemarkError, WriteConflictError
from tidemark.table import CommitResult, Table
from tidemark.timeline import Timeline, parse_instant_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_ROWS = 2_000
MIN_ROWS = 100

# Every writer opens the table with these options: optimistic concurrency control, the
# file-system lock (flock: it excludes threads of one process as it excludes processes),
# a write that lost a conflict is run again up to 5 times, a heartbeat every 2 s.
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.num.retries.on.conflict.failures": "5",
    "hoodie.client.heartbeat.interval_in_ms": "2000",
}

# -- the data --------------------------------------------------------------------------

SCHEMA = "trip_id string, city string, rider string, fare double, distance_km double, ts long"
COLUMNS = ("trip_id", "city", "rider", "fare", "distance_km", "ts")
CITIES = ("sf", "nyc", "la", "chi")
BACKFILL_CITY = "la"  # only the backfill writes here (an insert_overwrite replaces the whole partition)
START_TS = 1_767_225_600  # 2026-01-01T00:00:00Z, in seconds
RIDERS = 200

Row = tuple[str, str, str, float, float, int]


def _fare(distance: float, per_km: float = 2.1) -> float:
    return round(3.0 + distance * per_km, 2)


@dataclass
class Trips:
    """Makes trips from a seeded generator: the same plan on every run."""

    rng: random.Random = field(default_factory=lambda: random.Random(7))
    next_id: int = 0

    def new(
        self,
        n: int,
        *,
        cities: tuple[str, ...] = CITIES,
        riders: list[str] | None = None,
        ts_offset: int = 0,
    ) -> list[Row]:
        pool = riders or [f"rider-{i:03d}" for i in range(1, RIDERS + 1)]
        rows = []
        for _ in range(n):
            i = self.next_id
            self.next_id += 1
            distance = round(self.rng.uniform(0.5, 30.0), 2)
            rows.append((
                f"trip-{i:07d}",
                self.rng.choice(cities),
                self.rng.choice(pool),
                _fare(distance),
                distance,
                START_TS + ts_offset + i,
            ))
        return rows


def _later(row: Row, *, fare: float) -> Row:
    """The same trip with a new fare and a newer ts, so it wins the merge."""
    return (row[0], row[1], row[2], fare, row[4], row[5] + 1_000_000)


# -- the writers' plan -----------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One commit a writer makes: a Table method and its rows (or a rider to erase)."""

    op: str  # upsert, insert, delete, insert_overwrite
    what: str
    rows: tuple[Row, ...] = ()
    rider: str | None = None  # delete every trip of this rider, found by a read


@dataclass(frozen=True)
class Writer:
    name: str
    steps: tuple[Step, ...]
    options: tuple[tuple[str, str], ...] = ()  # on top of OCC


def plan_writers(trips: Trips, initial: list[Row], rows: int) -> list[Writer]:
    """The four writers' commits. They touch disjoint records, so the final table is the
    same whatever order their commits land in:

    * ingest adds new trips outside city=la, never of the erased riders, in new file groups
      (small files are not topped up), so it never conflicts with the writers that rewrite
      existing file groups;
    * correction updates trips of the initial load outside city=la, not of the erased riders;
    * GDPR delete erases riders whom nobody else writes: those with the most trips among
      the riders with the fewest trips in city=la (usually none);
    * backfill is the only other writer of city=la; its re-import leaves out the erased
      riders' trips (the corrected source honours the erasure too), so whether the delete
      or the overwrite lands first, no trip of theirs stays.
    """
    small = max(rows // 40, 5)
    others = tuple(c for c in CITIES if c != BACKFILL_CITY)
    per_rider = Counter(r[2] for r in initial)
    in_la = Counter(r[2] for r in initial if r[1] == BACKFILL_CITY)
    erased = sorted(per_rider, key=lambda name: (in_la[name], -per_rider[name], name))[:2]
    riders = [f"rider-{i:03d}" for i in range(1, RIDERS + 1) if f"rider-{i:03d}" not in erased]

    ingest = Writer("ingest", tuple(
        Step("upsert", f"{small} new trips into new file groups", tuple(trips.new(small, cities=others, riders=riders)))
        for _ in range(2)
    ), options=(("hoodie.parquet.small.file.limit", "0"),))
    pool = sorted(r for r in initial if r[1] != BACKFILL_CITY and r[2] not in erased)
    fixes = max(rows // 100, 3)
    picked = trips.rng.sample(pool, min(2 * fixes, len(pool)))
    correction = Writer("correction", tuple(
        Step("upsert", f"{len(batch)} corrected fares", tuple(_later(r, fare=round(r[3] * 0.9, 2)) for r in batch))
        for batch in (picked[:fixes], picked[fixes:])
    ))
    gdpr = Writer("GDPR delete", tuple(
        Step("delete", f"every trip of {rider}", rider=rider) for rider in erased
    ))
    reimport = tuple(
        (r[0], r[1], r[2], _fare(r[4], per_km=2.2), r[4], r[5])
        for r in initial if r[1] == BACKFILL_CITY and r[2] not in erased
    )
    late = trips.new(small, cities=(BACKFILL_CITY,), riders=riders, ts_offset=-10_000_000)
    backfill = Writer("backfill", (
        Step("insert_overwrite", f"city={BACKFILL_CITY} re-imported, {len(reimport)} trips", reimport),
        Step("insert", f"{len(late)} late trips of city={BACKFILL_CITY}", tuple(late)),
    ))
    return [ingest, correction, gdpr, backfill]


# -- the expected table, computed in Python --------------------------------------------


def apply(state: dict[str, Row], op: str, rows: Iterable[Row], rider: str | None = None) -> None:
    """What one committed write does to the table's rows (newest ts wins a merge)."""
    batch = list(rows)
    if rider is not None:  # the GDPR delete: every trip of the rider
        for key in [k for k, r in state.items() if r[2] == rider]:
            del state[key]
    elif op == "delete":
        for row in batch:
            state.pop(row[0], None)
    elif op == "insert_overwrite":
        replaced = {row[1] for row in batch}
        for key in [k for k, r in state.items() if r[1] in replaced]:
            del state[key]
        state.update((row[0], row) for row in batch)
    else:  # upsert, insert
        for row in batch:
            stored = state.get(row[0])
            if stored is None or row[5] >= stored[5]:
                state[row[0]] = row


# -- running the writers ---------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    writer: str
    step: Step
    result: CommitResult | None
    error: str | None = None


@dataclass
class Run:
    """The writers' shared state: what committed, and the printing of lines as they happen."""

    ui: Ui
    began: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)
    conflicts: int = 0
    crashed: list[BaseException] = field(default_factory=list)
    current: dict[str, str] = field(default_factory=dict)  # writer -> operation being written
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, writer: str, operation: str, rest: str, style: str = "") -> None:
        took = f"+{time.monotonic() - self.began:.1f}s"
        text = Text(f"  {took:>7}  {writer:<11}  {operation:<16}  ")
        text.append(rest, style=style)
        with self.lock:
            self.ui.out.print(text, soft_wrap=True)

    def committed(self, outcome: Outcome) -> None:
        result = outcome.result
        with self.lock:
            self.outcomes.append(outcome)
        if result is None:
            self.line(outcome.writer, outcome.step.op.upper(), f"gave up: {outcome.error}", "red")
            return
        attempts = result.attempts
        retried = f"  (lost {attempts - 1} conflict{'s' if attempts > 2 else ''}, retried)" if attempts > 1 else ""
        self.line(
            outcome.writer,
            result.operation,
            f"{result.instant_time}  {result.completion_time}  "
            f"+{count(result.num_inserts):<5} ~{count(result.num_updates):<5} -{count(result.num_deletes):<5} "
            f"attempts {attempts}{retried}",
            "yellow" if attempts > 1 else "",
        )

    def header(self) -> None:
        self.ui.out.print(Text(
            f"  {'time':>7}  {'writer':<11}  {'operation':<16}  {'requested':<17}  {'completed':<17}  "
            f"{'+ins':<6} {'~upd':<6} {'-del':<6} attempts",
            style="dim",
        ), soft_wrap=True)


class _ConflictLines(logging.Handler):
    """Turns the write client's "write conflict; retrying" warnings into demo lines."""

    def __init__(self, run: Run, writers: set[str]) -> None:
        super().__init__(logging.WARNING)
        self.run = run
        self.writers = writers

    def emit(self, record: logging.LogRecord) -> None:
        writer = threading.current_thread().name
        if writer not in self.writers:
            return
        conflict = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if isinstance(conflict, WriteConflictError):
            groups = len(conflict.file_groups)
            what = (
                f"{conflict.instant_time} lost to {conflict.conflicting_instant} "
                f"({groups} shared file group{'s' if groups != 1 else ''}): rolled back, retrying"
            )
        else:
            what = record.getMessage()
        with self.run.lock:
            self.run.conflicts += 1
        self.run.line(writer, self.run.current.get(writer, ""), what, "yellow")


@contextmanager
def conflict_lines(run: Run, writers: set[str]) -> Iterator[None]:
    logger = logging.getLogger("tidemark.write.client")
    handler = _ConflictLines(run, writers)
    before = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # no second copy of the warning on stderr
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = before


def write_step(spark: SparkSession, table: Table, step: Step) -> CommitResult | None:
    """Run one step; None when a GDPR read finds nothing to delete."""
    if step.rider is not None:
        from pyspark.sql import functions as F

        found = [
            (r["trip_id"], r["city"])
            for r in table.read().filter(F.col("rider") == step.rider).select("trip_id", "city").collect()
        ]
        if not found:
            return None
        return table.delete(spark.createDataFrame(found, "trip_id string, city string"))
    data = spark.createDataFrame(list(step.rows), SCHEMA)
    method: Callable[[DataFrame], CommitResult] = getattr(table, step.op)
    return method(data)


def run_writer(run: Run, spark: SparkSession, table: Table, writer: Writer, pool: bool) -> None:
    if pool:  # a FAIR-scheduler pool per writer: their Spark jobs share the cores evenly
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", writer.name)
    try:
        for step in writer.steps:
            run.current[writer.name] = step.op.upper()
            try:
                result = write_step(spark, table, step)
            except TidemarkError as exc:  # gave up (conflicts beyond the retries, heartbeat, lock)
                run.committed(Outcome(writer.name, step, None, f"{type(exc).__name__}: {exc}"))
                continue
            if result is None:
                run.line(writer.name, step.op.upper(), f"nothing to do: no trip of {step.rider} found")
                continue
            run.committed(Outcome(writer.name, step, result))
    except BaseException as exc:  # a bug or Spark failure: reported by the main thread
        with run.lock:
            run.crashed.append(exc)


def run_writers(
    ui: Ui, spark: SparkSession, path: str, writers: list[Writer], *, threads: bool, pool: bool
) -> Run:
    from pyspark import InheritableThread  # copies the JVM thread's local properties

    tables = [Table.open(path, spark=spark, options={**OCC, **dict(w.options)}) for w in writers]
    run = Run(ui)
    try:
        with conflict_lines(run, {w.name for w in writers}):
            run.header()
            run.began = time.monotonic()
            started = [
                InheritableThread(
                    target=run_writer, name=writer.name, args=(run, spark, table, writer, pool), daemon=True
                )
                for table, writer in zip(tables, writers, strict=True)
            ]
            for thread in started:
                thread.start()
                if not threads:  # sequential: each writer finishes before the next starts
                    thread.join()
            for thread in started:
                thread.join()
    finally:
        for table in tables:
            table.close()
    if run.crashed:
        raise run.crashed[0]
    return run


# -- after the writers -------------------------------------------------------------------


def _ms(instant_time: str) -> float:
    return parse_instant_time(instant_time).timestamp() * 1000


def print_chart(
    ui: Ui, table: Table, labels: Mapping[str, str], order: list[str], width: int = 60
) -> None:
    """The writers' commits as bars from requested to completion time (from the timeline)."""
    done = [
        i for i in Timeline.load(table.storage).completed_data_instants
        if i.requested_time in labels and labels[i.requested_time] != "initial load"
    ]
    if not done:
        return
    start = min(_ms(i.requested_time) for i in done)
    end = max(_ms(i.completion_time or i.requested_time) for i in done)
    span = max(end - start, 1.0)
    width = max(20, min(width, ui.out.width - 50))
    full, empty = ("█", "·") if ui.check == "✓" else ("#", ".")
    ui.out.print(Text(f"the writers over time: each bar is one commit, requested → completed "
                      f"({seconds(span / 1000)} in all)", style="bold"))
    rank = {name: n for n, name in enumerate(order)}
    for inst in sorted(done, key=lambda i: (rank.get(labels[i.requested_time], 99), i.requested_time)):
        a = int((_ms(inst.requested_time) - start) / span * width)
        b = max(a + 1, round((_ms(inst.completion_time or inst.requested_time) - start) / span * width))
        bar = empty * a + full * (b - a) + empty * (width - b)
        ui.out.print(Text(f"  {labels[inst.requested_time]:<11}  {inst.requested_time}  {bar}"))


def _diff(name: str, got: Mapping[str, Row], want: Mapping[str, Row]) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    parts = []
    if missing:
        parts.append(f"{len(missing)} trip(s) missing, e.g. {', '.join(missing[:3])}")
    if extra:
        parts.append(f"{len(extra)} unexpected trip(s), e.g. {', '.join(extra[:3])}")
    if changed:
        k = changed[0]
        parts.append(f"{len(changed)} trip(s) with other values, e.g. {k}: {got[k]} instead of {want[k]}")
    return f"{name}: " + "; ".join(parts)


def _as_rows(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Row], int]:
    """Rows by trip id, and how many records there were (to catch duplicate keys)."""
    out: dict[str, Row] = {}
    n = 0
    for r in records:
        n += 1
        out[str(r["trip_id"])] = (
            str(r["trip_id"]), str(r["city"]), str(r["rider"]), float(r["fare"]), float(r["distance_km"]),
            int(r["ts"]),
        )
    return out, n


def read_with_hudi_rs(path: str, columns: Sequence[str] = COLUMNS) -> list[dict[str, Any]]:
    """The table's ``columns`` as hudi-rs reads them. Raises ImportError without it."""
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    hudi_table = HudiTableBuilder.from_base_uri(os.path.abspath(path)).build()
    batches = hudi_table.read(HudiReadOptions())
    if not batches:
        return []
    return pa.Table.from_batches(batches).select(list(columns)).to_pylist()


def _same(ui: Ui, name: str, records: Sequence[Mapping[str, Any]], want: dict[str, Row]) -> bool:
    got, n = _as_rows(records)
    if n == len(got) and got == want:
        return True
    detail = _diff(name, got, want)
    if n != len(got):
        detail += f"; {n - len(got)} duplicate key(s)"
    ui.err.print(
        f"[red]error:[/] {escape(name)} does not read the expected {count(len(want))} rows: {escape(detail)}",
        soft_wrap=True,
    )
    return False


def verify(ui: Ui, table: Table, want: dict[str, Row]) -> bool:
    records = [r.asDict() for r in table.read().select(*COLUMNS).collect()]
    per_city = Counter(str(r["city"]) for r in records)
    grid = RichTable(
        title="rows per city", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    grid.add_column("city")
    grid.add_column("rows", justify="right")
    grid.add_column("expected", justify="right")
    expected_per_city = Counter(r[1] for r in want.values())
    for city in sorted(set(per_city) | set(expected_per_city)):
        grid.add_row(Text(city), count(per_city[city]), count(expected_per_city[city]))
    grid.add_row("[bold]total[/]", f"[bold]{count(len(records))}[/]", f"[bold]{count(len(want))}[/]")
    ui.out.print(grid)

    ok = _same(ui, "tidemark", records, want)
    if ok:
        ui.out.print(f"{ui.check} tidemark reads exactly the expected {count(len(want))} rows "
                     "(every column of every trip)")
    try:
        hudi_records = read_with_hudi_rs(table.path)
    except ImportError:
        ui.err.print("[yellow]warning:[/] hudi-rs is not installed (pip install hudi); "
                     "skipped the independent check", soft_wrap=True)
        return ok
    if _same(ui, "hudi-rs", hudi_records, want):
        ui.out.print(f"{ui.check} hudi-rs agrees: {count(len(hudi_records))} rows, the same values")
    else:
        ok = False
    return ok


# -- the command -----------------------------------------------------------------------


def _plan_lines(ui: Ui, writers: list[Writer]) -> None:
    for writer in writers:
        steps = "; then ".join(f"{s.op} {s.what}" for s in writer.steps)
        ui.out.print(Text(f"  {writer.name:<11}  {steps}"), soft_wrap=True)


def tell(ui: Ui, spark: SparkSession, table: Table, rows: int, threads: bool, pool: bool) -> tuple[bool, int]:
    """The story; returns whether the check passed and how many commits were made."""
    trips = Trips()
    initial = trips.new(rows)
    started = time.monotonic()
    with ui.out.status(f"bulk_insert of {count(rows)} trips…"):
        loaded = table.bulk_insert(spark.createDataFrame(initial, SCHEMA))
    ui.out.print(
        f"{ui.check} initial load: BULK_INSERT {loaded.instant_time}  +{count(loaded.num_inserts)} trips in "
        f"{loaded.num_files} files ({seconds(time.monotonic() - started)})"
    )
    writers = plan_writers(trips, initial, rows)

    ui.out.print()
    if threads:
        ui.out.print("[bold]Four writers at the same time[/] (threads; each its own Table with optimistic "
                     "concurrency control, the filesystem lock, up to 5 retries after a lost conflict)")
    else:
        ui.out.print("[bold]Four writers, one after another[/] (--writers-mode sequential: "
                     "no overlap, so no conflicts)")
    _plan_lines(ui, writers)
    ui.out.print()
    run = run_writers(ui, spark, table.path, writers, threads=threads, pool=pool)

    # The expected table: the initial load, then every write that committed, in the order
    # of their completion times. The writers touch disjoint records, so any order gives
    # the same rows; a write that gave up is left out.
    state = {r[0]: r for r in initial}
    done = sorted((o for o in run.outcomes if o.result), key=lambda o: o.result.completion_time if o.result else "")
    for outcome in done:
        apply(state, outcome.step.op, outcome.step.rows, outcome.step.rider)
    failed = [o for o in run.outcomes if o.result is None]
    retried = sum(1 for o in done if o.result and o.result.attempts > 1)
    ui.out.print(
        f"{len(done)} commits by {len(writers)} writers in {seconds(time.monotonic() - run.began)}; "
        f"{run.conflicts} lost conflict(s), {retried} commit(s) needed a retry"
        + (f"; {len(failed)} write(s) gave up (left out of the expected rows)" if failed else "")
    )

    labels = {loaded.instant_time: "initial load"}
    labels.update({o.result.instant_time: o.writer for o in done if o.result})
    ui.out.print()
    print_timeline(ui, table, title="timeline", labels=labels)
    ui.out.print()
    print_chart(ui, table, labels, [w.name for w in writers])
    ui.out.print()
    return verify(ui, table, state), len(done) + 1
