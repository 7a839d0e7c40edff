"""Every option tidemark accepts, declared once: key, default, parser and documentation.

Keys are Hudi's own where Hudi has one, so a Hudi user finds them where they
look. :mod:`tidemark.config.resolve` turns raw string options into typed
configs; nothing else reads a ``hoodie.*`` string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Parser = Callable[[str], Any]


def parse_bool(value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def parse_positive_int(value: str) -> int:
    number = int(str(value).strip())
    if number <= 0:
        raise ValueError("expected a positive whole number")
    return number


def parse_non_negative_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 0:
        raise ValueError("expected a whole number >= 0")
    return number


def choice(*allowed: str) -> Parser:
    def parse(value: str) -> str:
        normalized = str(value).strip().upper()
        for option in allowed:
            if option.upper() == normalized:
                return option
        raise ValueError(f"expected one of {', '.join(allowed)}")

    return parse


def parse_str(value: str) -> str:
    return str(value)


@dataclass(frozen=True)
class Option:
    key: str
    default: str | None
    parse: Parser
    doc: str
    scope: str = "write"  # "table": fixed at create time and kept in hoodie.properties


OPTIONS: tuple[Option, ...] = (
    Option(
        "hoodie.table.name",
        None,
        parse_str,
        "Table name written to hoodie.properties (default: the folder name).",
        "table",
    ),
    Option("hoodie.database.name", "default", parse_str, "Database name written to hoodie.properties.", "table"),
    Option(
        "hoodie.datasource.write.hive_style_partitioning",
        "true",
        parse_bool,
        "Partition folders named field=value (true) or just value (false).",
        "table",
    ),
    Option(
        "hoodie.parquet.max.file.size",
        str(120 * 1024 * 1024),
        parse_positive_int,
        "Largest base file to write, in bytes; larger file groups are split.",
    ),
    Option(
        "hoodie.parquet.small.file.limit",
        str(100 * 1024 * 1024),
        parse_non_negative_int,
        "Base files smaller than this take new inserts first (0 turns it off).",
    ),
    Option(
        "hoodie.copyonwrite.record.size.estimate",
        "1024",
        parse_positive_int,
        "Bytes per record assumed before the table has commits to learn it from.",
    ),
    Option(
        "hoodie.parquet.compression.codec",
        "snappy",
        choice("snappy", "gzip", "zstd", "lz4", "none", "uncompressed"),
        "Compression codec of base files.",
    ),
    Option(
        "hoodie.combine.before.insert",
        "false",
        parse_bool,
        "Deduplicate bulk_insert batches by key (insert and upsert always do).",
    ),
    Option(
        "hoodie.datasource.insert.dup.policy",
        "none",
        choice("none", "drop", "fail"),
        "insert of a key already in the table: none = update it (never a duplicate), "
        "drop = keep the stored record, fail = raise InvalidInputError.",
    ),
    Option(
        "hoodie.write.set.null.for.missing.columns",
        "false",
        parse_bool,
        "Accept batches that lack some table columns, writing nulls for them.",
    ),
    Option(
        "hoodie.write.concurrency.mode",
        "single_writer",
        choice("single_writer", "optimistic_concurrency_control"),
        "single_writer (one writer at a time) or optimistic_concurrency_control (many writers, "
        "a table lock for the short critical sections, conflicts checked at commit).",
    ),
    Option(
        "hoodie.clean.failed.writes.policy",
        None,
        choice("EAGER", "LAZY", "NEVER"),
        "When failed writes are rolled back: EAGER = every pending write at the next write's start "
        "(single writer only; the default there); LAZY = only writes whose heartbeat expired "
        "(the default, and the only safe choice, with several writers); NEVER.",
    ),
    Option(
        "hoodie.write.lock.provider",
        "filesystem",
        parse_str,
        "Lock provider: in_process, filesystem, zookeeper (or Hudi's class names).",
    ),
    Option(
        "hoodie.write.lock.wait_time_ms",
        "60000",
        parse_positive_int,
        "Longest wait of one attempt to acquire the lock.",
    ),
    Option(
        "hoodie.write.lock.num_retries",
        "15",
        parse_non_negative_int,
        "Further attempts after a timed-out one before LockTimeoutError.",
    ),
    Option(
        "hoodie.write.lock.wait_time_ms_between_retry",
        "1000",
        parse_non_negative_int,
        "First pause between attempts; doubles each time.",
    ),
    Option(
        "hoodie.write.lock.max_wait_time_ms_between_retry",
        "16000",
        parse_non_negative_int,
        "Longest pause between attempts.",
    ),
    Option(
        "hoodie.write.lock.filesystem.path",
        None,
        parse_str,
        "Lock file of the filesystem provider (default: <table>/.hoodie/.locks/table.lock).",
    ),
    Option(
        "hoodie.write.lock.filesystem.expire",
        "1",
        parse_non_negative_int,
        "Minutes after which a live holder of the filesystem lock is reported as stale (0 = never). "
        "A dead holder's lock is released at once by the operating system.",
    ),
    Option("hoodie.write.lock.zookeeper.url", None, parse_str, "ZooKeeper host(s) for the zookeeper provider."),
    Option("hoodie.write.lock.zookeeper.port", "2181", parse_positive_int, "ZooKeeper client port."),
    Option("hoodie.write.lock.zookeeper.base_path", "/hudi/locks", parse_str, "ZooKeeper folder of lock nodes."),
    Option(
        "hoodie.write.lock.zookeeper.lock_key",
        None,
        parse_str,
        "Lock node name (default: derived from the table path).",
    ),
    Option(
        "hoodie.write.lock.zookeeper.session_timeout_ms",
        "60000",
        parse_positive_int,
        "ZooKeeper session timeout: a dead holder's lock is released after it.",
    ),
    Option(
        "hoodie.write.lock.zookeeper.connection_timeout_ms",
        "15000",
        parse_positive_int,
        "How long to wait for a ZooKeeper connection.",
    ),
    Option(
        "hoodie.write.lock.conflict.resolution.strategy",
        "tidemark",
        parse_str,
        "tidemark = file groups plus concurrent inserts of the same key (no duplicates); "
        "simple = file groups only (Hudi's); or module:Class.",
    ),
    Option(
        "hoodie.write.num.retries.on.conflict.failures",
        "0",
        parse_non_negative_int,
        "Run a write that lost a conflict again, with a new instant, up to this many times.",
    ),
    Option(
        "hoodie.time.generator.max_expected_clock_skew_ms",
        "0",
        parse_non_negative_int,
        "Extra wait under the lock after generating an instant time. Times are already unique and "
        "increasing (each is above every time on the timeline); raise it to also keep them near "
        "wall-clock order across hosts with skewed clocks.",
    ),
    Option(
        "hoodie.client.heartbeat.interval_in_ms",
        "60000",
        parse_positive_int,
        "How often a writer refreshes its heartbeat.",
    ),
    Option(
        "hoodie.client.heartbeat.tolerable.misses",
        "2",
        parse_positive_int,
        "Missed heartbeats after which a writer counts as dead and its write may be rolled back.",
    ),
    Option(
        "hoodie.write.markers.type",
        "DIRECT",
        choice("DIRECT"),
        "How markers are kept: DIRECT = one file per data file under .hoodie/.temp.",
    ),
    Option(
        "hoodie.bulkinsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for bulk_insert (0 = keep the input's partitioning).",
    ),
    Option(
        "hoodie.upsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for the write stage of upsert/insert/delete (0 = Spark's default).",
    ),
    # -- table services: cleaning, archival (issue 6) -----------------------------------
    Option(
        "hoodie.clean.automatic",
        "true",
        parse_bool,
        "Clean old file versions inline after writes (see hoodie.clean.max.commits and "
        "hoodie.clean.policy). Off: only Table.clean / `tidemark clean` delete them.",
    ),
    Option(
        "hoodie.clean.policy",
        "KEEP_LATEST_COMMITS",
        choice("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS"),
        "What cleaning keeps: the file versions the last hoodie.clean.commits.retained commits need "
        "(time travel to them works), the last hoodie.clean.fileversions.retained versions of each "
        "file group, or the versions the last hoodie.clean.hours.retained hours need.",
    ),
    Option(
        "hoodie.clean.commits.retained",
        "10",
        parse_positive_int,
        "KEEP_LATEST_COMMITS: the number of latest commits whose file versions are kept.",
    ),
    Option(
        "hoodie.clean.fileversions.retained",
        "3",
        parse_positive_int,
        "KEEP_LATEST_FILE_VERSIONS: versions kept per file group (the latest always stays).",
    ),
    Option(
        "hoodie.clean.hours.retained",
        "24",
        parse_positive_int,
        "KEEP_LATEST_BY_HOURS: hours of time travel whose file versions are kept.",
    ),
    Option(
        "hoodie.clean.max.commits",
        "1",
        parse_positive_int,
        "Inline cleaning runs once this many commits completed since the last clean.",
    ),
    Option(
        "hoodie.archive.automatic",
        "true",
        parse_bool,
        "Archive the timeline inline after writes: move old completed instants into "
        ".hoodie/timeline/history/ (LSM layout) once more than hoodie.keep.max.commits "
        "commits are active.",
    ),
    Option(
        "hoodie.keep.min.commits",
        "20",
        parse_positive_int,
        "Archival keeps at least this many completed commits on the active timeline.",
    ),
    Option(
        "hoodie.keep.max.commits",
        "30",
        parse_positive_int,
        "Archival starts once the active timeline holds more completed commits than this.",
    ),
    Option(
        "hoodie.timeline.compaction.batch.size",
        "10",
        parse_positive_int,
        "History files of one level merged into one file of the next level (LSM compaction "
        "of the archived timeline), so reading the history stays a handful of files.",
    ),
    Option(
        "hoodie.archive.beyond.savepoint",
        "false",
        parse_bool,
        "Let archival move instants later than the earliest savepoint (the savepoint itself "
        "stays active). Restoring to a savepoint then fails if instants after it were archived.",
    ),
)

OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
