"""What one write published, as the public API reports it (:class:`CommitResult`)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemark.format.commit_metadata import WriteStat
from tidemark.timeline import Instant


@dataclass(frozen=True)
class CommitResult:
    """What one write published."""

    instant_time: str
    completion_time: str
    operation: str
    num_inserts: int
    num_updates: int
    num_deletes: int
    file_groups: tuple[str, ...]  # file ids written
    partitions: tuple[str, ...]
    num_files: int
    bytes_written: int
    attempts: int = 1  # > 1 when the write was retried after a conflict

    @classmethod
    def of(cls, instant: Instant, operation: str, stats: tuple[WriteStat, ...], attempts: int) -> CommitResult:
        """The result of the write that published ``instant`` with ``stats``."""
        return cls(
            instant_time=instant.requested_time,
            completion_time=instant.completion_time or "",
            operation=operation,
            num_inserts=sum(s.num_inserts for s in stats),
            num_updates=sum(s.num_updates for s in stats),
            num_deletes=sum(s.num_deletes for s in stats),
            file_groups=tuple(sorted({s.file_id for s in stats})),
            partitions=tuple(sorted({s.partition_path for s in stats})),
            num_files=len(stats),
            bytes_written=sum(s.file_size for s in stats),
            attempts=attempts,
        )
