"""One shape for every table service: plan under the lock, execute with a heartbeat, complete
under the lock, resumable after a crash.

A service supplies its steps (:class:`ServiceSteps`); :func:`run_service` runs them:

1. ``resume()`` without the lock: the plan a crashed run of this service left pending (it is
   run again from where it stopped), or :data:`BUSY` when a live runner in another process
   owns it, or None;
2. otherwise ``plan()`` under the table lock (a static view of the table): the plan, published
   as the service's requested instant, or None when there is nothing to do;
3. ``execute(plan)`` without the lock, concurrently with writers, while a heartbeat on the
   plan's instant tells other processes the runner is alive (multi-writer mode);
4. ``complete(plan, result)`` under the table lock: check, then publish the completed instant
   (a clean completes with one atomic create, no lock; clustering's commit takes the lock
   itself, after deleting the files of failed task attempts outside it);
5. on any failure of 3 or 4, ``abort(plan)``; in every case ``finish(plan)``.

Services whose work is one step under the lock (archive, savepoints, restore, rollback) use
:func:`run_locked`. The engine-specific part (compaction's slice runner, clustering's
executor) is handed to the steps by the caller: services never import an engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from tidemark.concurrency.heartbeat import Heartbeat, HeartbeatPolicy
from tidemark.storage import Storage

PlanT = TypeVar("PlanT")
ResultT = TypeVar("ResultT")
DoneT = TypeVar("DoneT")
T = TypeVar("T")


class _Busy:
    def __repr__(self) -> str:
        return "BUSY"


BUSY: Any = _Busy()  # resume(): a live runner elsewhere owns the pending plan; do nothing


class Lock(Protocol):
    def hold(self, purpose: str) -> Any: ...

    def assert_held(self) -> None:
        """Raise LockLostError if a lease-based lock lapsed (the fence before publishing)."""
        ...


class ServiceSteps(Generic[PlanT, ResultT, DoneT]):
    """The steps of one table service (see the module docstring). Defaults: nothing to resume,
    nothing to undo or tidy."""

    plan_purpose: str  # what the lock is taken for, in lock errors and logs
    # None: ``complete`` needs no lock from the runner: one atomic create-if-absent of the
    # completed instant (a clean's), or a completion that takes the lock itself (clustering's).
    complete_purpose: str | None

    def resume(self) -> PlanT | None:
        return None

    def plan(self) -> PlanT | None:
        raise NotImplementedError

    def instant_time(self, plan: PlanT) -> str:
        raise NotImplementedError

    def execute(self, plan: PlanT) -> ResultT:
        raise NotImplementedError

    def complete(self, plan: PlanT, result: ResultT) -> DoneT:
        raise NotImplementedError

    def abort(self, plan: PlanT) -> None:
        return None

    def finish(self, plan: PlanT) -> None:
        return None


def run_service(
    steps: ServiceSteps[PlanT, ResultT, DoneT],
    lock: Lock,
    *,
    storage: Storage,
    heartbeats: HeartbeatPolicy | None,
) -> DoneT | None:
    """Run ``steps`` (see the module docstring). ``heartbeats``: beat on the plan's instant while
    it executes (multi-writer mode), or None (one writer: nobody else could take it over).
    Returns what ``complete`` returned, or None when there was nothing to do."""
    planned = steps.resume()
    if planned is BUSY:
        return None
    if planned is None:
        with lock.hold(steps.plan_purpose):
            planned = steps.plan()
        if planned is None:
            return None
    heartbeat = Heartbeat(storage, steps.instant_time(planned), heartbeats).start() if heartbeats else None
    try:
        try:
            result = steps.execute(planned)
            if steps.complete_purpose is None:
                return steps.complete(planned, result)
            with lock.hold(steps.complete_purpose):
                lock.assert_held()  # the fence, as for writes: a lapsed lease publishes nothing
                return steps.complete(planned, result)
        except BaseException:
            steps.abort(planned)
            raise
        finally:
            steps.finish(planned)
    finally:
        if heartbeat is not None:
            heartbeat.stop()


def run_locked(lock: Lock, purpose: str, step: Callable[[], T]) -> T:
    """A service that is one step under the table lock (archive, savepoints, restore, rollback)."""
    with lock.hold(purpose):
        return step()
