"""The write operations, as one typed enum: what each one does to the table, step by step.

The write client asks an operation what to do (look keys up? replace file groups? which
timeline action?) rather than comparing operation names. Names and Hudi spellings are
Hudi's (``hoodie.datasource.write.operation``), so a Hudi job's options carry over.
"""

from __future__ import annotations

import enum

from tidemark.errors import ConfigError
from tidemark.timeline import Action


class Overwrite(enum.Enum):
    """Which existing file groups a write replaces (a replacecommit), besides writing its rows."""

    NONE = "none"
    BATCH_PARTITIONS = "batch_partitions"  # every file group of each partition the batch has
    TABLE = "table"  # every file group of the table
    NAMED_PARTITIONS = "named_partitions"  # every file group of the partitions asked for; no rows written


class WriteOperation(enum.Enum):
    """A write operation. ``value`` is the name users give (``Table.upsert`` is ``"upsert"``)."""

    UPSERT = "upsert"
    INSERT = "insert"
    DELETE = "delete"
    BULK_INSERT = "bulk_insert"
    INSERT_OVERWRITE = "insert_overwrite"
    INSERT_OVERWRITE_TABLE = "insert_overwrite_table"
    DELETE_PARTITION = "delete_partition"

    @classmethod
    def parse(cls, name: str | WriteOperation) -> WriteOperation:
        """The operation named ``name`` (any case; Hudi's ``INSERT_OVERWRITE`` too); ConfigError otherwise."""
        if isinstance(name, WriteOperation):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            known = ", ".join(op.value for op in cls)
            raise ConfigError(
                f"unknown write operation {name!r}; use one of: {known}",
                key="hoodie.datasource.write.operation",
            ) from None

    @property
    def hudi_name(self) -> str:
        """The name in commit metadata (``operationType``), as Hudi writes it."""
        return self.name

    def action(self, *, merge_on_read: bool) -> Action:
        """The timeline action of its instant: replacecommit for overwrites, else (delta)commit."""
        if self.overwrite is not Overwrite.NONE:
            return Action.REPLACE_COMMIT
        return Action.DELTA_COMMIT if merge_on_read else Action.COMMIT

    @property
    def overwrite(self) -> Overwrite:
        return {
            WriteOperation.INSERT_OVERWRITE: Overwrite.BATCH_PARTITIONS,
            WriteOperation.INSERT_OVERWRITE_TABLE: Overwrite.TABLE,
            WriteOperation.DELETE_PARTITION: Overwrite.NAMED_PARTITIONS,
        }.get(self, Overwrite.NONE)

    @property
    def keys_only(self) -> bool:
        """The batch needs only key, partition and ordering columns (the rest is ignored)."""
        return self in (WriteOperation.DELETE, WriteOperation.DELETE_PARTITION)

    @property
    def looks_up_keys(self) -> bool:
        """Existing keys are found (the index) so rows update their file group rather than add one."""
        return self in (WriteOperation.UPSERT, WriteOperation.INSERT, WriteOperation.DELETE)

    @property
    def writes_rows(self) -> bool:
        return self is not WriteOperation.DELETE_PARTITION

    @property
    def tops_up_small_files(self) -> bool:
        """New rows may go into existing small files (never when their file groups are replaced)."""
        return self.overwrite is Overwrite.NONE

    @property
    def replaces_base_files(self) -> bool:
        """Writes or replaces base files wholesale: refused to non-blocking (log-only) writers."""
        return self is WriteOperation.BULK_INSERT or self.overwrite is not Overwrite.NONE


__all__ = ["Overwrite", "WriteOperation"]
