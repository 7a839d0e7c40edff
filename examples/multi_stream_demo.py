"""The multi-stream story of the demo (``examples/demo.py --multi-stream``): two streams write
their own columns of one wide table at once.

A merge-on-read table with a bucket index, written with non-blocking concurrency
control and merged by column group (``hoodie.record.merge.column.groups``): the
``fares`` stream owns ``fare, tip`` ordered by ``fare_ts``, the ``status`` stream
owns ``status, driver`` ordered by ``status_ts``. Both are Spark writers (threads
of this process sharing its SparkSession, each with its own Table) and a third
thread compacts while they write. Events arrive out of order: a later batch often
carries older events. The expected table is computed in Python, per trip and per
group the values of the latest event; tidemark's snapshot read must equal it
while logs are still pending compaction, and after a final compaction hudi-rs
must read the same rows from the base files alone.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from multi_writer_demo import print_chart, read_with_hudi_rs
from rich.markup import escape
from rich.text import Text

from tidemark.cli.output import Ui, count, seconds
from tidemark.cli.timeline import print_timeline
from tidemark.errors import TidemarkError
from tidemark.table import CommitResult, Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NBCC = {
    "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.client.heartbeat.interval_in_ms": "2000",
    "hoodie.write.set.null.for.missing.columns": "true",  # each stream sends only its own columns
}
TABLE_OPTIONS = {
    "hoodie.table.name": "trip_state",
    "hoodie.index.type": "BUCKET",
    "hoodie.bucket.index.num.buckets": "4",
    "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
    "hoodie.record.merge.column.groups": "fare_ts:fare,tip;status_ts:status,driver",
}
SCHEMA = (
    "trip_id string, city string, fare_ts long, fare double, tip double, "
    "status_ts long, status string, driver string"
)
COLUMNS = ("trip_id", "city", "fare_ts", "fare", "tip", "status_ts", "status", "driver")
CITIES = ("sf", "nyc", "la", "chi")
STATUSES = ("requested", "accepted", "picked_up", "dropped_off", "paid")
BATCHES = 4


@dataclass(frozen=True)
class Stream:
    """One writer: the column group it owns and its batches of events, in arrival order."""

    name: str
    ordering_field: str
    columns: tuple[str, ...]
    batches: tuple[tuple[dict[str, Any], ...], ...]

    @property
    def ddl(self) -> str:
        types = {"fare": "double", "tip": "double", "status": "string", "driver": "string"}
        cols = ", ".join(f"{c} {types[c]}" for c in self.columns)
        return f"trip_id string, city string, {self.ordering_field} long, {cols}"


def make_streams(trips: int, seed: int = 7) -> list[Stream]:
    """Two streams of events about ``trips`` trips, with event times shuffled across batches."""
    rng = random.Random(seed)
    ids = [f"trip-{n:05d}" for n in range(trips)]
    city = {t: CITIES[n % len(CITIES)] for n, t in enumerate(ids)}

    def events(name: str, make: Any) -> list[dict[str, Any]]:
        out = []
        for trip in ids:
            for _ in range(rng.randint(1, 3)):  # several events per trip, some in one batch
                out.append({"trip_id": trip, "city": city[trip], **make()})
        rng.shuffle(out)  # arrival order is not event order: a later batch may carry older events
        return out

    # Event times unique per stream, so "the latest event" is well defined.
    fare_times = iter(rng.sample(range(1, 10_000_000), trips * 3))
    status_times = iter(rng.sample(range(1, 10_000_000), trips * 3))
    fares = events("fares", lambda: {"fare_ts": next(fare_times), "fare": round(rng.uniform(5, 80), 2),
                                     "tip": round(rng.uniform(0, 15), 2)})
    statuses = events("status", lambda: {"status_ts": next(status_times), "status": rng.choice(STATUSES),
                                         "driver": f"driver-{rng.randint(1, 60):02d}"})

    def split(rows: list[dict[str, Any]]) -> tuple[tuple[dict[str, Any], ...], ...]:
        size = -(-len(rows) // BATCHES)
        return tuple(tuple(rows[i : i + size]) for i in range(0, len(rows), size))

    return [
        Stream("fares", "fare_ts", ("fare", "tip"), split(fares)),
        Stream("status", "status_ts", ("status", "driver"), split(statuses)),
    ]


def expected_rows(streams: Iterable[Stream]) -> dict[str, dict[str, Any]]:
    """Per trip, per stream: the values of the event with the greatest event time."""
    state: dict[str, dict[str, Any]] = {}
    for stream in streams:
        for batch in stream.batches:
            for event in batch:
                row = state.setdefault(event["trip_id"], {c: None for c in COLUMNS} | {
                    "trip_id": event["trip_id"], "city": event["city"]})
                if row[stream.ordering_field] is None or event[stream.ordering_field] > row[stream.ordering_field]:
                    for column in (stream.ordering_field, *stream.columns):
                        row[column] = event[column]
    return state


@dataclass
class Progress:
    ui: Ui
    began: float = field(default_factory=time.monotonic)
    results: list[tuple[str, CommitResult]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    compactions: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, who: str, what: str) -> None:
        with self.lock:
            self.ui.out.print(Text(f"  +{time.monotonic() - self.began:5.1f}s  {who:<9}  {what}"), soft_wrap=True)


def _stream_writer(
    progress: Progress, spark: SparkSession, table: Table, stream: Stream, rounds: threading.Barrier
) -> None:
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", stream.name)
    try:
        for number, batch in enumerate(stream.batches, start=1):
            data = spark.createDataFrame(list(batch), stream.ddl)
            # Both streams send batch N together, so their writes overlap (once the other stream
            # is done, the barrier is broken and this one goes on alone).
            with contextlib.suppress(threading.BrokenBarrierError):
                rounds.wait(timeout=600)
            try:
                result = table.upsert(data)
            except TidemarkError as exc:
                with progress.lock:
                    progress.failures.append(f"{stream.name} batch {number}: {exc}")
                progress.line(stream.name, f"batch {number} FAILED: {exc}")
                continue
            with progress.lock:
                progress.results.append((stream.name, result))
            progress.line(stream.name, f"batch {number}: {count(len(batch))} events  deltacommit "
                                       f"{result.instant_time} → {result.completion_time}  "
                                       f"attempts {result.attempts}")
    finally:
        rounds.abort()  # never leave the other stream waiting for this one


def _compactor(progress: Progress, table: Table, writers: Sequence[threading.Thread]) -> None:
    while any(t.is_alive() for t in writers):
        try:
            done = table.compact()
        except TidemarkError as exc:
            progress.line("compactor", f"compaction failed: {exc}")
            return
        if done is not None:
            with progress.lock:
                progress.compactions += 1
            progress.line("compactor", f"compaction {done.instant.requested_time}: "
                                       f"{len(done.file_groups)} file groups (writers still running)")
        time.sleep(0.5)  # pacing only: a compaction needs new logs to have work


def _compare(ui: Ui, name: str, records: Iterable[Mapping[str, Any]], want: Mapping[str, Mapping[str, Any]]) -> bool:
    rows = [{c: r[c] for c in COLUMNS} for r in records]
    got = {r["trip_id"]: r for r in rows}
    if len(got) == len(rows) and got == want:
        return True
    missing = sorted(set(want) - set(got))
    wrong = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    detail = f"{len(rows) - len(got)} duplicate(s), {len(missing)} missing, {len(wrong)} with other values"
    if wrong:
        detail += f"; e.g. {wrong[0]}: {got[wrong[0]]} instead of {dict(want[wrong[0]])}"
    ui.err.print(f"[red]error:[/] {escape(name)} does not read the expected rows: {escape(detail)}", soft_wrap=True)
    return False


def tell(ui: Ui, spark: SparkSession, table_path: str, trips: int) -> tuple[bool, int]:
    """The multi-stream story; returns whether every check passed and how many commits were made."""
    from pyspark import InheritableThread

    streams = make_streams(trips)
    table = Table.create(table_path, spark=spark, record_key="trip_id", partition_by="city",
                         table_type="MERGE_ON_READ", options={**TABLE_OPTIONS, **NBCC}, schema=SCHEMA)
    ui.out.print(f"{ui.check} created table trip_state (MERGE_ON_READ, bucket index, 4 buckets), merged by "
                 "column group:\n    fares  owns fare, tip        ordered by fare_ts\n"
                 "    status owns status, driver   ordered by status_ts")
    ui.out.print("[bold]Two Spark writers at the same time[/] (non-blocking concurrency control: they only "
                 "append logs, take the lock only for instant times, and never abort), plus a compactor:")
    tables = {s.name: Table.open(table_path, spark=spark, options=NBCC) for s in streams}
    progress = Progress(ui)
    rounds = threading.Barrier(len(streams))
    try:
        writers = [InheritableThread(target=_stream_writer, name=s.name, daemon=True,
                                     args=(progress, spark, tables[s.name], s, rounds)) for s in streams]
        for thread in writers:
            thread.start()
        _compactor(progress, table, writers)
        for thread in writers:
            thread.join()
    finally:
        for t in tables.values():
            t.close()
    aborted = sum(r.attempts - 1 for _, r in progress.results) + len(progress.failures)
    ui.out.print(f"{len(progress.results)} deltacommits by 2 writers and {progress.compactions} compaction(s) in "
                 f"{seconds(time.monotonic() - progress.began)}; {aborted} aborted or retried writes")
    ui.out.print()
    labels = {r.instant_time: name for name, r in progress.results}
    print_timeline(ui, table, title="timeline", labels=labels)
    ui.out.print()
    print_chart(ui, table, labels, [s.name for s in streams])
    ui.out.print()

    want = expected_rows(streams)
    ok = not progress.failures and aborted == 0
    records = [r.asDict() for r in table.read().select(*COLUMNS).collect()]
    if _compare(ui, "tidemark (snapshot read, logs merged by column group)", records, want):
        ui.out.print(f"{ui.check} tidemark reads {count(len(want))} trips, each with the latest fare and the "
                     "latest status, whatever order the events arrived and the writers committed in")
    else:
        ok = False
    final = table.compact()
    if final is not None:
        ui.out.print(f"{ui.check} final compaction {final.instant.requested_time}: every log merged into "
                     "base files")
    try:
        hudi = read_with_hudi_rs(table_path, COLUMNS)
    except ImportError:
        ui.err.print("[yellow]warning:[/] hudi-rs is not installed (pip install hudi); skipped the independent "
                     "check", soft_wrap=True)
    else:
        if _compare(ui, "hudi-rs (after the final compaction)", hudi, want):
            ui.out.print(f"{ui.check} hudi-rs reads the same {count(len(hudi))} trips from the compacted table")
        else:
            ok = False
    table.close()
    return ok, len(progress.results) + progress.compactions + (final is not None)

