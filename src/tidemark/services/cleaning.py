"""Cleaning as a table service: the steps of :mod:`tidemark.services.runner` over the clean
primitives of :mod:`tidemark.recovery.clean`.

The plan is made under the table lock (adopting the plans of dead cleaners first) and
published as ``<t>.clean.requested``; the files are deleted outside the lock, concurrently
with writers, each plan under its own heartbeat; a clean completes under the lock (its
metadata-table deltacommit and completed instant), unless another executor of the same plan
completed it already (:func:`~tidemark.recovery.clean.execute_clean`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemark.config import WriteConfig
from tidemark.recovery.clean import CleanResult, ScheduledClean, execute_clean, needs_cleaning, schedule_clean
from tidemark.recovery.rollback import RollbackResult
from tidemark.services.runner import ServiceSteps, run_service
from tidemark.timeline import Timeline
from tidemark.write.commit import CommitProtocol

_Planned = tuple[list[ScheduledClean], str | None]  # the plans to execute, and why none is new


class CleanSteps(ServiceSteps[_Planned, list[CleanResult], CleanResult]):
    plan_purpose = "schedule a clean"
    complete_purpose = None  # each plan completes as it is executed (execute_clean takes the lock)

    def __init__(self, protocol: CommitProtocol, config: WriteConfig, rolled_back: Sequence[RollbackResult]) -> None:
        self.protocol = protocol
        self.storage = protocol.storage
        self.config = config
        self.rolled_back = tuple(rolled_back)

    def plan(self) -> _Planned:
        return schedule_clean(
            self.storage, Timeline.load(self.storage), self.config.clean, self.protocol.heartbeats,
            multi_writer=self.config.multi_writer,
        )

    def instant_time(self, plan: _Planned) -> str:
        return plan[0][-1].plan.instant_time if plan[0] else ""

    def execute(self, plan: _Planned) -> list[CleanResult]:
        return [execute_clean(self.storage, scheduled, lambda: self.protocol.lock.hold("complete a clean"))
                for scheduled in plan[0]]

    def complete(self, plan: _Planned, result: list[CleanResult]) -> CleanResult:
        if not result:
            return CleanResult(rolled_back=self.rolled_back, skipped=plan[1])
        last = result[-1]
        return CleanResult(
            rolled_back=self.rolled_back,
            clean_instant=last.clean_instant,
            deleted_files=tuple(f for r in result for f in r.deleted_files),
            earliest_to_retain=last.earliest_to_retain,
            kept_for_savepoints=tuple(f for r in result for f in r.kept_for_savepoints),
            finished=tuple(r.clean_instant for r in result[:-1] if r.clean_instant is not None),
        )


def run_clean(protocol: CommitProtocol, config: WriteConfig, *, rollback_failed: bool,
              hint: Timeline | None = None) -> CleanResult:
    """Clean the table: first roll back failed writes whose heartbeat expired if
    ``rollback_failed``, then run the clean's steps (see the module docstring). ``hint``: a
    recent timeline (the one a write just committed on) to decide without listing whether
    there is anything to clean; the plan is made under the lock on a fresh one."""
    storage = protocol.storage
    # Pending cleans of dead cleaners are adopted by the plan step (and reported), not here.
    rolled_back = tuple(protocol.rollback_expired_writes(finish_cleans=False)) if rollback_failed else ()
    if rolled_back or hint is None:
        hint = Timeline.load(storage)
    if not needs_cleaning(storage, hint, config.clean):
        # Checked without the lock first, so writers that clean inline after every commit
        # take the lock only when there is something to do.
        return CleanResult(rolled_back=rolled_back, skipped="nothing to clean")
    result = run_service(CleanSteps(protocol, config, rolled_back), protocol.lock, storage=storage, heartbeats=None)
    assert result is not None  # the plan step always returns a plan (perhaps with nothing to execute)
    return result
