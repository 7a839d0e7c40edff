"""How a table merges records: the typed choice, its validation, and the merger it builds.

Kept in ``hoodie.properties`` (Hudi's keys where Hudi has one)::

    hoodie.record.merge.mode          COMMIT_TIME_ORDERING | EVENT_TIME_ORDERING | CUSTOM
    hoodie.record.merge.strategy.id   Hudi's id of the strategy (written, informational)
    hoodie.table.ordering.fields      ordering fields, comma-separated (several: lexicographic)
    hoodie.table.partial.update.mode  IGNORE_DEFAULTS: null columns of an update keep the stored value
    hoodie.record.merge.column.groups tidemark: "ts_a:a1,a2;ts_b:b1" (ordering field: its columns)
    hoodie.write.record.merge.custom.implementation.classes   CUSTOM: "package.module:Class"

=======================================  ==================================
settings                                 merger
=======================================  ==================================
COMMIT_TIME_ORDERING                     CommitTimeMerger
EVENT_TIME_ORDERING (ordering fields)    EventTimeMerger
either + partial update IGNORE_DEFAULTS  PartialUpdateMerger
EVENT_TIME_ORDERING + column groups      ColumnGroupMerger
CUSTOM + class                           the class, built with no arguments
=======================================  ==================================
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tidemark.errors import ConfigError
from tidemark.format.properties import TableConfig
from tidemark.merge.base import RecordMerger
from tidemark.merge.mergers import (
    ColumnGroup,
    ColumnGroupMerger,
    CommitTimeMerger,
    EventTimeMerger,
    PartialUpdateMerger,
)

COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
CUSTOM = "CUSTOM"
MERGE_MODES = (COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING, CUSTOM)


MERGE_MODE_KEY = "hoodie.record.merge.mode"
PARTIAL_UPDATE_KEY = "hoodie.table.partial.update.mode"
COLUMN_GROUPS_KEY = "hoodie.record.merge.column.groups"
CUSTOM_CLASS_KEY = "hoodie.write.record.merge.custom.implementation.classes"
PARTIAL_UPDATE_MODES = ("IGNORE_DEFAULTS",)


def parse_column_groups(value: str) -> tuple[ColumnGroup, ...]:
    """``"ts_a:a1,a2;ts_b:b1"`` -> groups; raises ConfigError naming the problem."""
    groups: list[ColumnGroup] = []
    seen: dict[str, str] = {}
    for part in (p.strip() for p in value.split(";")):
        if not part:
            continue
        ordering, sep, cols = part.partition(":")
        ordering = ordering.strip()
        columns = tuple(c.strip() for c in cols.split(",") if c.strip())
        if not sep or not ordering or not columns:
            raise ConfigError(
                f"{COLUMN_GROUPS_KEY}: group {part!r} must be '<ordering field>:<column>,<column>...'",
                key=COLUMN_GROUPS_KEY,
            )
        group = ColumnGroup(ordering, columns)
        for column in group.all_columns:
            if column in seen:
                raise ConfigError(
                    f"{COLUMN_GROUPS_KEY}: column {column!r} is in the groups of both "
                    f"{seen[column]!r} and {ordering!r}; a column belongs to one group",
                    key=COLUMN_GROUPS_KEY,
                )
            seen[column] = ordering
        groups.append(group)
    if not groups:
        raise ConfigError(f"{COLUMN_GROUPS_KEY} is empty; give '<ordering field>:<columns>;...'", key=COLUMN_GROUPS_KEY)
    return tuple(groups)


def format_column_groups(groups: Sequence[ColumnGroup]) -> str:
    return ";".join(f"{g.ordering_field}:{','.join(g.columns)}" for g in groups)


@dataclass(frozen=True)
class MergeConfig:
    """A table's merge settings, validated; :meth:`merger` builds the merger (picklable)."""

    mode: str = COMMIT_TIME_ORDERING
    ordering_fields: tuple[str, ...] = ()
    partial_update: bool = False
    column_groups: tuple[ColumnGroup, ...] = ()
    custom_class: str | None = None

    @classmethod
    def of_table(cls, table: TableConfig) -> MergeConfig:
        """The merge settings kept in a table's hoodie.properties."""
        return cls.build(
            mode=table.record_merge_mode,
            ordering_fields=table.ordering_fields,
            partial_update_mode=table.partial_update_mode,
            column_groups=table.merge_column_groups,
            custom_class=table.custom_merger_class,
        )

    @classmethod
    def build(
        cls,
        *,
        mode: str | None,
        ordering_fields: Sequence[str] = (),
        partial_update_mode: str | None = None,
        column_groups: str | Sequence[ColumnGroup] | None = None,
        custom_class: str | None = None,
    ) -> MergeConfig:
        """Validate a combination of settings (ConfigError names the key at fault)."""
        ordering = tuple(ordering_fields)
        groups = parse_column_groups(column_groups) if isinstance(column_groups, str) else tuple(column_groups or ())
        if groups:
            group_fields = tuple(g.ordering_field for g in groups)
            if ordering and ordering != group_fields:
                raise ConfigError(
                    f"{COLUMN_GROUPS_KEY} orders by {list(group_fields)} but the ordering fields are "
                    f"{list(ordering)}; leave ordering_field out (it follows the groups) or make them agree",
                    key=COLUMN_GROUPS_KEY,
                )
            ordering = group_fields
        if mode is None:
            mode = CUSTOM if custom_class else EVENT_TIME_ORDERING if ordering else COMMIT_TIME_ORDERING
        mode = str(mode).strip().upper()
        if mode not in MERGE_MODES:
            raise ConfigError(
                f"{MERGE_MODE_KEY}={mode!r} is invalid: expected one of {', '.join(MERGE_MODES)}", key=MERGE_MODE_KEY
            )
        partial = False
        if partial_update_mode is not None:
            value = str(partial_update_mode).strip().upper()
            if value not in PARTIAL_UPDATE_MODES:
                raise ConfigError(
                    f"{PARTIAL_UPDATE_KEY}={partial_update_mode!r} is not supported: tidemark supports "
                    f"{', '.join(PARTIAL_UPDATE_MODES)} (null columns of an update keep the stored value)",
                    key=PARTIAL_UPDATE_KEY,
                )
            partial = True
        if mode == EVENT_TIME_ORDERING and not ordering:
            raise ConfigError(
                f"{MERGE_MODE_KEY}=EVENT_TIME_ORDERING needs ordering fields (ordering_field=...)", key=MERGE_MODE_KEY
            )
        if mode == CUSTOM and not custom_class:
            raise ConfigError(
                f"{MERGE_MODE_KEY}=CUSTOM needs {CUSTOM_CLASS_KEY}=package.module:Class", key=CUSTOM_CLASS_KEY
            )
        if custom_class and mode != CUSTOM:
            raise ConfigError(f"{CUSTOM_CLASS_KEY} is only used with {MERGE_MODE_KEY}=CUSTOM", key=CUSTOM_CLASS_KEY)
        if groups and mode != EVENT_TIME_ORDERING:
            raise ConfigError(f"{COLUMN_GROUPS_KEY} needs {MERGE_MODE_KEY}=EVENT_TIME_ORDERING", key=COLUMN_GROUPS_KEY)
        if groups and partial:
            raise ConfigError(
                f"{COLUMN_GROUPS_KEY} and {PARTIAL_UPDATE_KEY} cannot be combined: a column-group merge already "
                "changes only the groups an update wins",
                key=PARTIAL_UPDATE_KEY,
            )
        if partial and mode == CUSTOM:
            raise ConfigError(f"{PARTIAL_UPDATE_KEY} does not apply to a CUSTOM merger", key=PARTIAL_UPDATE_KEY)
        config = cls(mode, ordering, partial, groups, custom_class)
        if custom_class:
            config.merger()  # fail now, not in the first write's tasks
        return config

    def merger(self, schema: pa.Schema | None = None) -> RecordMerger:
        """The merger for these settings (``schema`` refines the column-group merger's claims)."""
        if self.mode == CUSTOM:
            return load_custom_merger(self.custom_class or "")
        if self.column_groups:
            merger = ColumnGroupMerger(self.column_groups)
            return merger.check_schema(schema) if schema is not None else merger
        ordering = self.ordering_fields if self.mode == EVENT_TIME_ORDERING else ()
        if self.partial_update:
            return PartialUpdateMerger(ordering)
        if ordering:
            return EventTimeMerger(ordering)
        return CommitTimeMerger()

    @property
    def max_by_dedup(self) -> bool:
        """Whether batch dedup may keep one whole record per key (greatest ordering values, then
        the last): true for commit-time and event-time ordering."""
        return self.mode != CUSTOM and not self.partial_update and not self.column_groups

    def check_schema(self, schema: pa.Schema, *, key_fields: Sequence[str], partition_fields: Sequence[str]) -> None:
        """Column groups must name columns of the table and cover every non-key column."""
        if not self.column_groups:
            return
        names = set(schema.names)
        grouped = {c for g in self.column_groups for c in g.all_columns}
        absent = sorted(grouped - names)
        if absent:
            raise ConfigError(
                f"{COLUMN_GROUPS_KEY} names column(s) {absent} that the table does not have", key=COLUMN_GROUPS_KEY
            )
        loose = [n for n in schema.names if n not in grouped and n not in key_fields and n not in partition_fields]
        if loose:
            raise ConfigError(
                f"{COLUMN_GROUPS_KEY}: column(s) {loose} are in no group; every column except the record key "
                "and partition fields must belong to one group",
                key=COLUMN_GROUPS_KEY,
            )


def load_custom_merger(path: str) -> RecordMerger:
    """Import ``package.module:Class`` and build it with no arguments; ConfigError if that fails
    or the object is not a RecordMerger (``name``, ``properties``, ``merge``)."""
    module_name, sep, class_name = path.partition(":")
    if not sep or not module_name or not class_name:
        raise ConfigError(f"{CUSTOM_CLASS_KEY}={path!r} must be 'package.module:Class'", key=CUSTOM_CLASS_KEY)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{CUSTOM_CLASS_KEY}: cannot import module {module_name!r}: {exc}", key=CUSTOM_CLASS_KEY
        ) from exc
    target = getattr(module, class_name, None)
    if target is None:
        raise ConfigError(f"{CUSTOM_CLASS_KEY}: module {module_name!r} has no {class_name!r}", key=CUSTOM_CLASS_KEY)
    try:
        merger = target()
    except Exception as exc:
        raise ConfigError(
            f"{CUSTOM_CLASS_KEY}: {path} could not be built with no arguments: {exc}", key=CUSTOM_CLASS_KEY
        ) from exc
    if not isinstance(merger, RecordMerger):
        raise ConfigError(
            f"{CUSTOM_CLASS_KEY}: {path} is not a record merger (it needs name, properties and merge(older, newer))",
            key=CUSTOM_CLASS_KEY,
        )
    return merger
