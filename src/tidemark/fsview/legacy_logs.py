"""Which deltacommit wrote a log file named the version 6 way.

Version 8 names a log file after the deltacommit that wrote it. Version 6 (Hudi 0.x)
named it after the base instant of its file slice, so the name says nothing about when
the log became visible: Hudi 0.x read the instant out of each log block's header. The
deltacommits' metadata lists the log files each one wrote (``path`` / ``logFiles`` of
their write stats), which gives the same answer without opening the logs: the earliest
completed deltacommit that lists the file wrote it. (Hudi 0.x on HDFS could append the
blocks of later deltacommits to the same file; those blocks then become visible with the
file's first writer here: time travel between them is coarser than block level.)

Used for version 6 tables and for tables upgraded from version 6 (``Timeline.legacy_log_names``).
"""

from __future__ import annotations

import weakref

from tidemark.timeline import Action, Instant, Timeline

# Per timeline snapshot (timelines never change): built once, dropped with the snapshot.
_WRITERS: weakref.WeakKeyDictionary[Timeline, dict[str, Instant]] = weakref.WeakKeyDictionary()


def _writers(timeline: Timeline) -> dict[str, Instant]:
    found = _WRITERS.get(timeline)
    if found is None:
        found = {}
        done = [i for i in timeline.completed if i.action is Action.DELTA_COMMIT]
        for inst in sorted(done, key=lambda i: (i.completion_time or "", i.requested_time), reverse=True):
            for stat in timeline.commit_metadata(inst).write_stats:
                for path in (stat.path, *stat.log_files):
                    if path:
                        found[path.rsplit("/", 1)[-1]] = inst  # the earliest writer is set last
        _WRITERS[timeline] = found
    return found


def legacy_log_writer(timeline: Timeline, log_name: str) -> Instant | None:
    """The completed deltacommit that wrote the log file ``log_name``, if its metadata lists it."""
    return _writers(timeline).get(log_name)
