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


def parse_detection_strategy(value: str) -> Any:
    from tidemark.config.early_conflict import parse_detection_strategy as parse

    return parse(value)


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


def parse_updates_strategy(value: str) -> str:
    """``allow`` / ``reject``, or Hudi's update-strategy class names."""
    name = str(value).strip().rsplit(".", 1)[-1].lower()
    aliases = {"sparkallowupdatestrategy": "allow", "sparkrejectupdatestrategy": "reject"}
    return choice("allow", "reject")(aliases.get(name, name))


@dataclass(frozen=True)
class Option:
    key: str
    default: str | None
    parse: Parser
    doc: str
    scope: str = "write"  # "table": fixed at create time and kept in hoodie.properties
    # Older keys of the option that Hudi still accepts for it (Hudi 0.x's, renamed in 1.x).
    alternatives: tuple[str, ...] = ()


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
        "hoodie.datasource.write.partitionpath.urlencode",
        "false",
        parse_bool,
        "Escape partition values as Hudi does ('/', ':', '%', '=', control characters... as %XX) so any "
        "value can be a folder; without it values holding '/' or control characters are refused. "
        "Fixed when the table is created.",
        "table",
    ),
    Option(
        "hoodie.record.merge.mode",
        None,
        choice("COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING", "CUSTOM"),
        "How records with the same key merge: COMMIT_TIME_ORDERING (the later write wins), "
        "EVENT_TIME_ORDERING (greater ordering values win; several fields compare lexicographically), "
        "CUSTOM (a merger class). Default: EVENT_TIME_ORDERING with ordering fields, else COMMIT_TIME_ORDERING.",
        "table",
    ),
    Option(
        "hoodie.table.partial.update.mode",
        None,
        choice("IGNORE_DEFAULTS"),
        "Partial updates: IGNORE_DEFAULTS = columns an update leaves null keep the stored value "
        "(the winner is still chosen by the merge mode).",
        "table",
    ),
    Option(
        "hoodie.record.merge.column.groups",
        None,
        parse_str,
        "Column-group merge (multi-stream join), tidemark's key: 'ts_a:a1,a2;ts_b:b1' = groups of "
        "columns, each with its own ordering field; per group the values with the greater ordering "
        "value win. Every column except record key and partition fields belongs to one group. "
        "Needs EVENT_TIME_ORDERING (the default with groups).",
        "table",
    ),
    Option(
        "hoodie.write.record.merge.custom.implementation.classes",
        None,
        parse_str,
        "CUSTOM merge mode: the merger class as 'package.module:Class' (built with no arguments; it "
        "has name, properties and merge(older, newer) over Arrow tables, see tidemark.merge.RecordMerger).",
        "table",
    ),
    Option(
        "hoodie.index.type",
        "SIMPLE",
        choice("SIMPLE", "BUCKET"),
        "SIMPLE: look keys up in the latest base files. BUCKET: a key's file group is a pure function "
        "of its partition and hash(key) mod hoodie.bucket.index.num.buckets (no lookup).",
        "table",
    ),
    Option(
        "hoodie.bucket.index.num.buckets",
        "256",
        parse_positive_int,
        "Bucket index: file groups (buckets) per partition; fixed when the table is created.",
        "table",
    ),
    Option(
        "hoodie.bucket.index.hash.field",
        None,
        parse_str,
        "Bucket index: the record-key fields hashed to pick the bucket, comma-separated "
        "(default: all record-key fields).",
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
        "hoodie.parquet.bloom.filter.enabled",
        "true",
        parse_bool,
        "Write Hudi's record-key bloom filter into every base file's footer (Hudi's bloom index reads "
        "it; tidemark's Arrow engine prunes files with it). About 0.5 us of CPU per key; false keeps "
        "the key range and Avro schema but leaves the filter out.",
    ),
    Option(
        "hoodie.metadata.enable",
        "true",
        parse_bool,
        "Hudi's metadata table (.hoodie/metadata). true (the default): a table tidemark creates gets "
        "one, as in Hudi 1.x, and every action keeps its files partition true (the partitions tidemark "
        "does not maintain are dropped); false: a table is created without one, and a writer removes an "
        "existing one the way Hudi does (clears hoodie.table.metadata.partitions, then deletes the folder). "
        "A table without one (created with false, or written by a Hudi writer with it off) gets one only "
        "from a writer that passes true explicitly, bootstrapped from the folders when no instant is "
        "pending (docs/metadata-table.md).",
    ),
    Option(
        "hoodie.metadata.compact.max.delta.commits",
        "10",
        parse_positive_int,
        "Metadata table: deltacommits in its files partition's latest file slice that trigger a "
        "compaction of the partition into a new HFile base file (then its old file slices are cleaned "
        "and its timeline archived, behind the data table's).",
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
        choice("single_writer", "optimistic_concurrency_control", "non_blocking_concurrency_control"),
        "single_writer (one writer at a time); optimistic_concurrency_control (many writers, "
        "a table lock for the short critical sections, conflicts checked at commit); or "
        "non_blocking_concurrency_control (merge-on-read tables with a bucket index only: writers "
        "append log files, take the lock only for instant times and publishing, and never abort "
        "each other; readers and compaction merge with the table's record merger). A multi-writer mode "
        "and its lock are recorded on the table by its first such write: later writers must use the same "
        "(WriterSettingsError otherwise; change them with Table.set_concurrency / `tidemark concurrency --set`).",
    ),
    Option(
        "hoodie.clean.failed.writes.policy",
        None,
        choice("EAGER", "LAZY", "NEVER"),
        "When failed writes are rolled back: EAGER = every pending write at the next write's start "
        "(single writer only; the default there); LAZY = only writes whose heartbeat expired "
        "(the default, and the only safe choice, with several writers); NEVER.",
        alternatives=("hoodie.cleaner.policy.failed.writes",),
    ),
    Option(
        "hoodie.write.lock.provider",
        "filesystem",
        parse_str,
        "Lock provider: filesystem (writers on one machine), zookeeper (any machines), storage (a lock "
        "object in the table's own storage, any store with conditional writes), dynamodb, or in_process "
        "(threads of ONE process only: a second process using it on the same table is refused with "
        "InProcessLockError); Hudi's class names work too. The table records the mode and lock of its "
        "writers; writers with another lock are refused (`tidemark concurrency`, Table.set_concurrency).",
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
        None,
        choice("DIRECT", "TIMELINE_SERVER_BASED"),
        "How markers are kept: DIRECT = one empty file per data file under .hoodie/.temp/<instant>/; "
        "TIMELINE_SERVER_BASED = a few MARKERS<n> files there (fewer files for writes of many files): "
        "the Arrow engine's tasks, threads of the writing process, write them themselves, the markers "
        "of every planned file in one; Spark's tasks send theirs to a marker server in the driver, "
        "which batches them. Default: TIMELINE_SERVER_BASED for the Arrow engine, DIRECT for the Spark "
        "engine and wherever early conflict detection uses direct markers.",
    ),
    Option(
        "hoodie.markers.timeline_server_based.batch.interval_ms",
        "50",
        parse_positive_int,
        "Marker server: the batcher's idle poll interval. Requests are written as soon as a MARKERS file "
        "is free and batched while all are busy (group commit), so this does not delay a marker.",
    ),
    Option(
        "hoodie.markers.timeline_server_based.batch.num_threads",
        "20",
        parse_positive_int,
        "Marker server: threads writing batches, and so the number of MARKERS<n> files.",
    ),
    Option(
        "hoodie.write.concurrency.early.conflict.detection.enable",
        "false",
        parse_bool,
        "Detect conflicts with other writers while writing, before each file group's marker, "
        "instead of only at commit: a doomed write stops at its first conflicting file group. "
        "Needs optimistic_concurrency_control.",
    ),
    Option(
        "hoodie.write.concurrency.early.conflict.detection.strategy",
        None,
        parse_detection_strategy,
        "simple_direct (check before each direct marker), transactional_direct (check and create "
        "the marker under a lock on partition/fileId: no race slips through), async_timeline_server "
        "(the marker server checks periodically); Hudi's class names work too. "
        "Default: simple_direct for DIRECT markers, async_timeline_server for the marker server.",
    ),
    Option(
        "hoodie.write.concurrency.early.conflict.check.commit.conflict",
        "false",
        parse_bool,
        "Early detection also stops at file groups that writes completed since this write planned "
        "have changed (their markers are gone by then).",
    ),
    Option(
        "hoodie.write.concurrency.async.conflict.detector.initial_delay_ms",
        "0",
        parse_non_negative_int,
        "async_timeline_server: delay before the marker server's first conflict check.",
    ),
    Option(
        "hoodie.write.concurrency.async.conflict.detector.period_ms",
        "30000",
        parse_positive_int,
        "async_timeline_server: interval between the marker server's conflict checks.",
    ),
    Option(
        "hoodie.bulkinsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for bulk_insert (0 = keep the input's partitioning); the Arrow engine: the "
        "most partitions written at once, on threads (0 = one per core; never more than the cores).",
    ),
    # -- clustering (table service): see tidemark.services.cluster --------------------------
    Option(
        "hoodie.clustering.inline",
        "false",
        parse_bool,
        "Cluster the table after every hoodie.clustering.inline.max.commits commits, in the writer "
        "that made the last of them (a clustering that loses to ingestion is logged, never raised).",
    ),
    Option(
        "hoodie.clustering.inline.max.commits",
        "4",
        parse_positive_int,
        "With hoodie.clustering.inline: commits since the last clustering that trigger the next one.",
    ),
    Option(
        "hoodie.clustering.plan.strategy.small.file.limit",
        str(300 * 1024 * 1024),
        parse_positive_int,
        "Base files smaller than this (bytes) are clustering candidates.",
    ),
    Option(
        "hoodie.clustering.plan.strategy.target.file.max.bytes",
        str(1024 * 1024 * 1024),
        parse_positive_int,
        "Size (bytes) of the files clustering writes: each group becomes ceil(group bytes / this) files.",
    ),
    Option(
        "hoodie.clustering.plan.strategy.max.bytes.per.group",
        str(2 * 1024 * 1024 * 1024),
        parse_positive_int,
        "Most input bytes in one clustering group (one task rewrites a group; with sort columns in memory).",
    ),
    Option(
        "hoodie.clustering.plan.strategy.max.num.groups",
        "30",
        parse_positive_int,
        "Most groups in one clustering plan; the rest waits for the next clustering.",
    ),
    Option(
        "hoodie.clustering.plan.strategy.sort.columns",
        None,
        parse_str,
        "Comma-separated columns that clustering sorts each group's rows by (none: keep their order).",
    ),
    Option(
        "hoodie.clustering.updates.strategy",
        "allow",
        parse_updates_strategy,
        "A write to a file group under pending clustering: allow = ingestion wins, the write commits "
        "and the clustering aborts at its commit; reject = the write fails with "
        "ClusteringConflictError. Hudi's class names SparkAllowUpdateStrategy / "
        "SparkRejectUpdateStrategy are accepted.",
    ),
    Option(
        "hoodie.upsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for the write stage of upsert/insert/delete (0 = Spark's default); the Arrow "
        "engine: the most file groups written at once, on threads (0 = one per core; never more than the cores).",
    ),
    Option(
        "hoodie.compact.inline",
        "false",
        parse_bool,
        "Merge-on-read: compact inside the writer, right after a deltacommit, once "
        "hoodie.compact.inline.max.delta.commits deltacommits piled up since the last compaction.",
    ),
    Option(
        "hoodie.compact.inline.max.delta.commits",
        "5",
        parse_positive_int,
        "Merge-on-read: deltacommits since the last compaction that trigger an inline compaction.",
    ),
    Option(
        "hoodie.logfile.data.block.format",
        "avro",
        choice("avro", "parquet"),
        "Merge-on-read: how log files hold upserted records: avro (Hudi's default) or parquet "
        "(a parquet file inside the block: bigger to write for tiny batches, much faster to read).",
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
        alternatives=("hoodie.cleaner.policy",),
    ),
    Option(
        "hoodie.clean.commits.retained",
        "10",
        parse_positive_int,
        "KEEP_LATEST_COMMITS: the number of latest commits whose file versions are kept.",
        alternatives=("hoodie.cleaner.commits.retained",),
    ),
    Option(
        "hoodie.clean.fileversions.retained",
        "3",
        parse_positive_int,
        "KEEP_LATEST_FILE_VERSIONS: versions kept per file group (the latest always stays).",
        alternatives=("hoodie.cleaner.fileversions.retained",),
    ),
    Option(
        "hoodie.clean.hours.retained",
        "24",
        parse_positive_int,
        "KEEP_LATEST_BY_HOURS: hours of time travel whose file versions are kept.",
        alternatives=("hoodie.cleaner.hours.retained",),
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



def _lock_provider_options() -> tuple[Option, ...]:
    from tidemark.config import lock_options as lo

    parsers = {lo.POSITIVE_INT: parse_positive_int, lo.TEXT: parse_str, lo.BILLING_MODE: choice(*lo.BILLING_MODES)}
    return tuple(Option(key, default, parsers[kind], doc) for key, default, kind, doc in lo.lock_provider_options())


OPTIONS = OPTIONS + _lock_provider_options()  # the storage and dynamodb lock providers' keys
OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
# Each alternative key and the option's key it stands for.
ALTERNATIVE_KEYS: dict[str, str] = {alt: o.key for o in OPTIONS for alt in o.alternatives}
