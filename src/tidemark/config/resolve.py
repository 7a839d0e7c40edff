"""Turn raw options into a typed, validated :class:`WriteConfig`: the one place keys are read."""

from __future__ import annotations

import difflib
import enum
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings
from tidemark.config.early_conflict import validate as validate_early_conflict
from tidemark.config.locks import LockSettings, canonical_provider_name
from tidemark.config.options import ALTERNATIVE_KEYS, OPTIONS_BY_KEY
from tidemark.errors import ConfigError, UnknownOptionError


class CleanPolicy(str, enum.Enum):
    """What cleaning keeps (``hoodie.clean.policy``)."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


@dataclass(frozen=True)
class CleanConfig:
    """Cleaning: which file versions to keep, and when inline cleaning runs."""

    automatic: bool = True
    policy: CleanPolicy = CleanPolicy.KEEP_LATEST_COMMITS
    commits_retained: int = 10
    file_versions_retained: int = 3
    hours_retained: timedelta = timedelta(hours=24)
    max_commits: int = 1  # inline cleaning once this many commits completed since the last clean


@dataclass(frozen=True)
class ArchiveConfig:
    """Archival: the bounds of the active timeline and the LSM history's compaction."""

    automatic: bool = True
    min_commits: int = 20
    max_commits: int = 30
    compaction_batch: int = 10
    beyond_savepoint: bool = False


@dataclass(frozen=True)
class ClusteringConfig:
    """Clustering options (``hoodie.clustering.*``), validated."""

    inline: bool = False
    inline_max_commits: int = 4
    small_file_limit: int = 300 * 1024 * 1024
    target_file_size: int = 1024 * 1024 * 1024
    max_bytes_per_group: int = 2 * 1024 * 1024 * 1024
    max_groups: int = 30
    sort_columns: tuple[str, ...] = ()
    updates_strategy: str = "allow"  # "allow": ingestion wins; "reject": writes to clustered groups fail

    @property
    def reject_updates(self) -> bool:
        return self.updates_strategy == "reject"


NON_BLOCKING = "non_blocking_concurrency_control"


@dataclass(frozen=True)
class WriteConfig:
    """Validated writer options; every field has the default of its declared option."""

    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    compression: str
    combine_before_bulk_insert: bool
    insert_dup_policy: str
    set_null_for_missing_columns: bool
    concurrency_mode: str
    failed_writes_policy: str
    markers_type: str | None  # None: the engine's default (engine-free code cannot know it)
    bulk_insert_parallelism: int
    upsert_parallelism: int
    retries_on_conflict: int = 0
    conflict_strategy: str = "tidemark"
    clock_skew_ms: int = 0
    heartbeat_interval_ms: int = 60_000
    heartbeat_tolerable_misses: int = 2
    lock: LockSettings = field(default_factory=LockSettings)
    marker_batch_interval_ms: int = 50
    marker_batch_threads: int = 20
    early_conflict: EarlyConflictSettings | None = None  # None: detection off
    clustering: ClusteringConfig = field(default_factory=ClusteringConfig)
    compact_inline: bool = False
    compact_inline_max_delta_commits: int = 5
    log_block_format: str = "avro"
    bloom_filter: bool = True
    metadata_enable: bool = True  # hoodie.metadata.enable: false removes a metadata table, true keeps files
    metadata_bootstrap: bool = False  # hoodie.metadata.enable=true given explicitly: bootstrap one if absent
    metadata_compact_max_delta_commits: int = 10
    clean: CleanConfig = field(default_factory=CleanConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)

    @property
    def multi_writer(self) -> bool:
        return self.concurrency_mode != "single_writer"

    @property
    def non_blocking(self) -> bool:
        """Non-blocking concurrency control: writers append logs and never conflict."""
        return self.concurrency_mode == NON_BLOCKING


_FIELDS = {
    "max_file_size": "hoodie.parquet.max.file.size",
    "small_file_limit": "hoodie.parquet.small.file.limit",
    "record_size_estimate": "hoodie.copyonwrite.record.size.estimate",
    "compression": "hoodie.parquet.compression.codec",
    "bloom_filter": "hoodie.parquet.bloom.filter.enabled",
    "metadata_enable": "hoodie.metadata.enable",
    "metadata_compact_max_delta_commits": "hoodie.metadata.compact.max.delta.commits",
    "combine_before_bulk_insert": "hoodie.combine.before.insert",
    "insert_dup_policy": "hoodie.datasource.insert.dup.policy",
    "set_null_for_missing_columns": "hoodie.write.set.null.for.missing.columns",
    "concurrency_mode": "hoodie.write.concurrency.mode",
    "failed_writes_policy": "hoodie.clean.failed.writes.policy",
    "markers_type": "hoodie.write.markers.type",
    "bulk_insert_parallelism": "hoodie.bulkinsert.shuffle.parallelism",
    "upsert_parallelism": "hoodie.upsert.shuffle.parallelism",
    "retries_on_conflict": "hoodie.write.num.retries.on.conflict.failures",
    "conflict_strategy": "hoodie.write.lock.conflict.resolution.strategy",
    "clock_skew_ms": "hoodie.time.generator.max_expected_clock_skew_ms",
    "heartbeat_interval_ms": "hoodie.client.heartbeat.interval_in_ms",
    "heartbeat_tolerable_misses": "hoodie.client.heartbeat.tolerable.misses",
    "marker_batch_interval_ms": "hoodie.markers.timeline_server_based.batch.interval_ms",
    "marker_batch_threads": "hoodie.markers.timeline_server_based.batch.num_threads",
    "compact_inline": "hoodie.compact.inline",
    "compact_inline_max_delta_commits": "hoodie.compact.inline.max.delta.commits",
    "log_block_format": "hoodie.logfile.data.block.format",
}


def _early_conflict(raw: Mapping[str, str], values: dict[str, Any]) -> EarlyConflictSettings | None:
    key = "hoodie.write.concurrency.early.conflict.detection.enable"
    if not parse_option(key, raw):
        return None
    if values["concurrency_mode"] == "single_writer":
        raise ConfigError(
            "early conflict detection needs other writers to detect: set "
            "hoodie.write.concurrency.mode=optimistic_concurrency_control (and a lock provider)",
            key=key,
        )
    if values["concurrency_mode"] == NON_BLOCKING:
        raise ConfigError(
            "early conflict detection has nothing to detect with non_blocking_concurrency_control: "
            "its writers never conflict; leave hoodie.write.concurrency.early.conflict.detection.enable unset",
            key=key,
        )
    strategy = parse_option("hoodie.write.concurrency.early.conflict.detection.strategy", raw)
    if strategy is None:
        server = values["markers_type"] == "TIMELINE_SERVER_BASED"
        strategy = DetectionStrategy.ASYNC_TIMELINE_SERVER if server else DetectionStrategy.SIMPLE_DIRECT
    if values["markers_type"] is None:  # the markers the strategy works on
        values["markers_type"] = "DIRECT" if strategy.uses_direct_markers else "TIMELINE_SERVER_BASED"
    settings = EarlyConflictSettings(
        strategy=strategy,
        check_commit_conflict=parse_option("hoodie.write.concurrency.early.conflict.check.commit.conflict", raw),
        heartbeat_expiry_ms=values["heartbeat_interval_ms"] * values["heartbeat_tolerable_misses"],
        async_initial_delay_ms=parse_option("hoodie.write.concurrency.async.conflict.detector.initial_delay_ms", raw),
        async_period_ms=parse_option("hoodie.write.concurrency.async.conflict.detector.period_ms", raw),
    )
    validate_early_conflict(settings, values["markers_type"])
    return settings


def _lock_settings(raw: Mapping[str, str]) -> LockSettings:
    provider = canonical_provider_name(parse_option("hoodie.write.lock.provider", raw))
    settings = LockSettings(
        provider=provider,
        wait_time_ms=parse_option("hoodie.write.lock.wait_time_ms", raw),
        num_retries=parse_option("hoodie.write.lock.num_retries", raw),
        retry_wait_ms=parse_option("hoodie.write.lock.wait_time_ms_between_retry", raw),
        max_retry_wait_ms=parse_option("hoodie.write.lock.max_wait_time_ms_between_retry", raw),
        filesystem_path=parse_option("hoodie.write.lock.filesystem.path", raw),
        filesystem_expire_ms=parse_option("hoodie.write.lock.filesystem.expire", raw) * 60_000,
        zk_url=parse_option("hoodie.write.lock.zookeeper.url", raw),
        zk_port=parse_option("hoodie.write.lock.zookeeper.port", raw),
        zk_base_path=parse_option("hoodie.write.lock.zookeeper.base_path", raw),
        zk_lock_key=parse_option("hoodie.write.lock.zookeeper.lock_key", raw),
        zk_session_timeout_ms=parse_option("hoodie.write.lock.zookeeper.session_timeout_ms", raw),
        zk_connection_timeout_ms=parse_option("hoodie.write.lock.zookeeper.connection_timeout_ms", raw),
        **_object_store_lock_settings(raw),
    )
    if provider == "zookeeper" and not settings.zk_url:
        raise ConfigError(
            "the zookeeper lock provider needs hoodie.write.lock.zookeeper.url (and .port)",
            key="hoodie.write.lock.zookeeper.url",
        )
    return settings


def _object_store_lock_settings(raw: Mapping[str, str]) -> dict[str, Any]:
    """The storage and dynamodb providers' settings, with Hudi's rules for the lease timings."""
    validity_key = "hoodie.write.lock.storage.validity.timeout.secs"
    renew_key = "hoodie.write.lock.storage.renew.interval.secs"
    old_key = "hoodie.write.lock.storage.heartbeat.poll.secs"
    renew, old = parse_option(renew_key, raw), parse_option(old_key, raw)
    if renew is not None and old is not None and renew != old:
        raise ConfigError(f"{old_key} is the deprecated name of {renew_key}: set one, not both", key=renew_key)
    renew = renew or old or 30
    validity = parse_option(validity_key, raw)
    if validity < 10:
        raise ConfigError(f"{validity_key} must be at least 10 seconds (it is {validity})", key=validity_key)
    if validity < 10 * renew:
        raise ConfigError(
            f"{validity_key} ({validity}) must be at least 10x {renew_key} ({renew}), so that a live holder "
            "renews its lease many times before it could run out",
            key=validity_key,
        )
    return {
        "storage_validity_s": validity,
        "storage_renew_interval_s": renew,
        "dynamodb_table": parse_option("hoodie.write.lock.dynamodb.table", raw),
        "dynamodb_partition_key": parse_option("hoodie.write.lock.dynamodb.partition_key", raw),
        "dynamodb_region": parse_option("hoodie.write.lock.dynamodb.region", raw),
        "dynamodb_endpoint_url": parse_option("hoodie.write.lock.dynamodb.endpoint_url", raw),
        "dynamodb_billing_mode": parse_option("hoodie.write.lock.dynamodb.billing_mode", raw),
        "dynamodb_read_capacity": parse_option("hoodie.write.lock.dynamodb.read_capacity", raw),
        "dynamodb_write_capacity": parse_option("hoodie.write.lock.dynamodb.write_capacity", raw),
        "dynamodb_table_creation_timeout_ms": parse_option("hoodie.write.lock.dynamodb.table_creation_timeout", raw),
    }


def _clustering_config(raw: Mapping[str, str]) -> ClusteringConfig:
    sort = parse_option("hoodie.clustering.plan.strategy.sort.columns", raw) or ""
    config = ClusteringConfig(
        inline=parse_option("hoodie.clustering.inline", raw),
        inline_max_commits=parse_option("hoodie.clustering.inline.max.commits", raw),
        small_file_limit=parse_option("hoodie.clustering.plan.strategy.small.file.limit", raw),
        target_file_size=parse_option("hoodie.clustering.plan.strategy.target.file.max.bytes", raw),
        max_bytes_per_group=parse_option("hoodie.clustering.plan.strategy.max.bytes.per.group", raw),
        max_groups=parse_option("hoodie.clustering.plan.strategy.max.num.groups", raw),
        sort_columns=tuple(c.strip() for c in sort.split(",") if c.strip()),
        updates_strategy=parse_option("hoodie.clustering.updates.strategy", raw),
    )
    check_clustering_sizes(config)
    return config


def check_clustering_sizes(config: ClusteringConfig) -> None:
    """Reject sizes that would make clustering rewrite its own output again and again."""
    if config.small_file_limit > config.target_file_size:
        raise ConfigError(
            "hoodie.clustering.plan.strategy.small.file.limit must not exceed "
            "hoodie.clustering.plan.strategy.target.file.max.bytes "
            f"({config.small_file_limit} > {config.target_file_size}): clustering would pick its own "
            "output files again",
            key="hoodie.clustering.plan.strategy.small.file.limit",
        )


def _clean_config(raw: Mapping[str, str]) -> CleanConfig:
    return CleanConfig(
        automatic=parse_option("hoodie.clean.automatic", raw),
        policy=CleanPolicy(parse_option("hoodie.clean.policy", raw)),
        commits_retained=parse_option("hoodie.clean.commits.retained", raw),
        file_versions_retained=parse_option("hoodie.clean.fileversions.retained", raw),
        hours_retained=timedelta(hours=parse_option("hoodie.clean.hours.retained", raw)),
        max_commits=parse_option("hoodie.clean.max.commits", raw),
    )


def _archive_config(raw: Mapping[str, str], clean: CleanConfig) -> ArchiveConfig:
    config = ArchiveConfig(
        automatic=parse_option("hoodie.archive.automatic", raw),
        min_commits=parse_option("hoodie.keep.min.commits", raw),
        max_commits=parse_option("hoodie.keep.max.commits", raw),
        compaction_batch=parse_option("hoodie.timeline.compaction.batch.size", raw),
        beyond_savepoint=parse_option("hoodie.archive.beyond.savepoint", raw),
    )
    if config.min_commits > config.max_commits:
        raise ConfigError(
            "hoodie.keep.min.commits must not exceed hoodie.keep.max.commits "
            f"({config.min_commits} > {config.max_commits})",
            key="hoodie.keep.min.commits",
        )
    if config.compaction_batch < 2:
        raise ConfigError(
            f"hoodie.timeline.compaction.batch.size must be at least 2, got {config.compaction_batch}",
            key="hoodie.timeline.compaction.batch.size",
        )
    if clean.policy is CleanPolicy.KEEP_LATEST_COMMITS and config.min_commits <= clean.commits_retained:
        # Hudi's rule too: the commits whose file versions cleaning keeps must stay on the active
        # timeline, or time travel to them would find files whose commit it cannot see.
        raise ConfigError(
            "hoodie.keep.min.commits must be greater than hoodie.clean.commits.retained "
            f"({config.min_commits} <= {clean.commits_retained})",
            key="hoodie.keep.min.commits",
        )
    return config


def validate_keys(options: Mapping[str, Any]) -> dict[str, str]:
    """Options as strings, under their keys (an alternative key, as Hudi 1.x accepts
    ``hoodie.cleaner.policy`` for ``hoodie.clean.policy``, under the option's key); raises
    UnknownOptionError (with the closest key) for unknown keys, ConfigError for an option given
    under two of its keys with two values."""
    out: dict[str, str] = {}
    given_as: dict[str, str] = {}
    for given, value in options.items():
        key = ALTERNATIVE_KEYS.get(given, given)
        if key not in OPTIONS_BY_KEY:
            close = difflib.get_close_matches(key, OPTIONS_BY_KEY, n=1, cutoff=0.6)
            raise UnknownOptionError(key, close[0] if close else None)
        if value is None:
            raise ConfigError(f"option {given!r} is None; give a value or leave it out", key=key)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if key in out and not _same_value(key, out[key], text):
            raise ConfigError(f"option {key} is given twice, as {given_as[key]}={out[key]!r} and {given}={text!r}; "
                              f"give it once (as {key})", key=key)
        out[key], given_as[key] = text, given
    return out


def _same_value(key: str, first: str, second: str) -> bool:
    """Whether two values of option ``key`` mean the same (``keep_latest_commits`` and
    ``KEEP_LATEST_COMMITS``); values that do not parse are compared as given."""
    parse = OPTIONS_BY_KEY[key].parse
    try:
        return bool(first == second or parse(first) == parse(second))
    except (ValueError, TypeError):
        return first == second


def parse_option(key: str, options: Mapping[str, str], declared: Mapping[str, Any] = OPTIONS_BY_KEY) -> Any:
    """The parsed value of ``key`` in ``options`` (its default when absent); ConfigError if invalid.
    ``declared``: the options ``key`` is declared among (the writer's, unless given)."""
    option = declared[key]
    raw = options.get(key, option.default)
    if raw is None:
        return None
    try:
        return option.parse(raw)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"option {key}={raw!r} is invalid: {exc}", key=key) from exc


def resolve_write_config(options: Mapping[str, Any] | None) -> WriteConfig:
    """Validate ``options`` and return the typed writer configuration."""
    raw = validate_keys(options or {})
    values = {name: parse_option(key, raw) for name, key in _FIELDS.items()}
    multi = values["concurrency_mode"] != "single_writer"
    policy = values["failed_writes_policy"]
    if policy is None:
        values["failed_writes_policy"] = "LAZY" if multi else "EAGER"
    elif multi and policy == "EAGER":
        warnings.warn(
            "hoodie.clean.failed.writes.policy=EAGER would roll back other writers' live writes; "
            "with several writers tidemark uses LAZY "
            "(only writes whose heartbeat expired are rolled back)",
            stacklevel=3,
        )
        values["failed_writes_policy"] = "LAZY"
    clean = _clean_config(raw)
    early_conflict = _early_conflict(raw, values)  # may settle the marker type
    config = replace(
        WriteConfig(**values),
        metadata_bootstrap="hoodie.metadata.enable" in raw and bool(values["metadata_enable"]),
        lock=_lock_settings(raw),
        early_conflict=early_conflict,
        clustering=_clustering_config(raw),
        clean=clean,
        archive=_archive_config(raw, clean),
    )
    if config.non_blocking and config.clustering.inline:
        raise ConfigError(
            "hoodie.clustering.inline cannot be combined with non_blocking_concurrency_control: clustering "
            "replaces base files, which non-blocking writers never do; use compaction (hoodie.compact.inline)",
            key="hoodie.clustering.inline",
        )
    if config.small_file_limit >= config.max_file_size:
        raise ConfigError(
            "hoodie.parquet.small.file.limit must be below hoodie.parquet.max.file.size "
            f"({config.small_file_limit} >= {config.max_file_size})",
            key="hoodie.parquet.small.file.limit",
        )
    return config
