"""Which partitions a clean has to look at (Hudi's incremental cleaning).

A file version is cleaned once a newer version of its file group (or the replacecommit that
replaced the group) is older than the retained window. The previous completed clean handled
every version superseded before its earliest instant to retain (it records it); so only
partitions that a completed data instant at or after that instant wrote or replaced can hold
anything new to clean. Hudi plans its ``KEEP_LATEST_COMMITS`` and ``KEEP_LATEST_BY_HOURS``
cleans the same way (``hoodie.clean.incremental.mode``, on by default).

All partitions (None: the caller lists them all, which without a metadata table walks the
table) when there is no completed clean to start from, when instants after it were archived
(their partitions are not on the active timeline), for ``KEEP_LATEST_FILE_VERSIONS`` (it
counts versions, not time), and while a savepoint exists (its files are spared by every
clean, and deleting it lets them go wherever they are).
"""

from __future__ import annotations

from tidemark.config.resolve import CleanConfig, CleanPolicy
from tidemark.format.commit_metadata import read_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.timeline import Action, State, Timeline

_ECTR: dict[str, str] = {}  # completed clean instant file -> its earliest instant to retain (never change)


def _since_last_clean(timeline: Timeline) -> str | None:
    done = timeline.filter(actions=[Action.CLEAN], states=[State.COMPLETED])
    if not done:
        return None
    latest = max(done, key=lambda i: i.requested_time)
    path = timeline.instant_path(latest)
    earliest = _ECTR.get(path)
    if earliest is None:
        rec = read_avro(timeline.instant_bytes(latest), source=f"{TIMELINE_DIR}/{latest.file_name}")
        earliest = _ECTR[path] = rec.get("earliestCommitToRetain") or latest.requested_time
    return min(earliest, latest.requested_time)


def partitions_to_clean(timeline: Timeline, config: CleanConfig) -> set[str] | None:
    """The partitions a clean planned on ``timeline`` needs to list, or None for all of them."""
    if config.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return None
    if timeline.filter(actions=[Action.SAVEPOINT]):
        return None
    start = _since_last_clean(timeline)
    if start is None or timeline.is_archived(start):
        return None
    out: set[str] = set()
    for inst in timeline.completed_data_instants:
        if inst.requested_time < start:
            continue
        meta = timeline.commit_metadata(inst)
        out.update(s.partition_path for s in meta.write_stats)
        out.update(meta.replaced_file_ids)
    return out
