"""The Arrow engine's write tasks on a bounded pool of threads: file groups written side by side.

pyarrow releases the GIL while it takes rows, encodes and compresses parquet and hashes keys,
so file groups written on threads keep every core busy, as Spark's tasks would. The contract
is the serial one's:

* results come back in task order (the write statistics, hence the commit metadata, do not
  depend on which thread finished first);
* at most ``workers`` tasks run at once and a task is started only when a thread is free: each
  task takes its own rows when it starts, so no more file groups are in memory than threads;
* with ``weights`` (the bytes each task is expected to write), a task starts beside others only
  while the running tasks' weights stay within ``budget``, and a task above half of it runs
  alone, in the calling thread: a rewrite holds memory in proportion
  to its file group, and two large ones side by side would double the write's peak memory
  (measured: a 5M-row upsert of five 51 MiB file groups, 1.09x -> 1.79x the rewritten bytes
  above the baseline; of ten 27 MiB ones, 1.15x -> 1.68x: the allocators' pages kept per
  thread, not Arrow's live buffers, which grow by ~60 MiB), while many small file groups are
  where threads pay most; a write of SIDE_BY_SIDE_WRITE_BYTES or less in all is scheduled
  without weights (:func:`scheduling_weights`): its two large file groups at most run side by
  side (an upsert of two 27 MiB file groups: ~0.6 -> ~0.5 s, its peak ~100 MiB higher);
* once a task fails (or the write is cancelled), no further task starts; the running ones are
  waited for, so no file is being written when the caller rolls the instant back, and the
  failure of the first failing task (in task order) is raised, as the serial loop would.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from tidemark.errors import CommitError

T = TypeVar("T")

# Expected bytes (as the write plan weighs file groups) of the tasks running side by side; a
# task larger than half of it runs alone (so the two files of a one-partition bulk_insert of a
# million narrow rows, ~27 MiB each, are rewritten one at a time).
PARALLEL_WRITE_BYTES = 48 * 1024 * 1024
# A write whose file groups weigh this much or less in all runs them side by side, large or not:
# one-at-a-time keeps the peak of a write that rewrites many large files near one rewrite's
# working set (the memory target: 2x the rewritten bytes), while a write this small rewrites
# two files at most and its peak is the process's baseline, not its files.
SIDE_BY_SIDE_WRITE_BYTES = 2 * PARALLEL_WRITE_BYTES


def runs_alone(weight: int, budget: int = PARALLEL_WRITE_BYTES) -> bool:
    """Whether a task of ``weight`` expected bytes runs alone (no two such tasks fit the budget)."""
    return 2 * weight > budget


def scheduling_weights(weights: Sequence[int] | None) -> Sequence[int] | None:
    """The weights :meth:`WriteTasks.run` is to schedule by: None (no task runs alone, every
    task may run beside others) for a write of at most SIDE_BY_SIDE_WRITE_BYTES in all."""
    return None if weights is None or sum(weights) <= SIDE_BY_SIDE_WRITE_BYTES else weights


def gives_pages_back(weights: Sequence[int] | None) -> bool:
    """Whether a write of file groups of ``weights`` (their expected bytes; None: not known)
    gives the pages pyarrow's pool holds freed back to the system between its steps: only a
    write scheduled by weights (:func:`scheduling_weights`), whose next steps (its large file
    groups, if any, rewritten alone) would add them to their peak. A smaller write keeps them
    for its next steps, as the allocator would, which returns them on its own: pages given back
    are faulted in and zeroed again by the next allocations (a 1M-row upsert of two 27 MiB file
    groups: ~0.04 s of ~0.40, ~10 %)."""
    return weights is None or scheduling_weights(weights) is not None


def write_threads(configured: int, tasks: int) -> int:
    """Threads for ``tasks`` file-group writes: one per core, fewer if ``configured`` (Hudi's
    shuffle parallelism option, > 0) or the number of tasks says so; never more than the cores
    (every thread holds one file group's rows)."""
    cores = os.cpu_count() or 1
    limit = min(cores, configured) if configured > 0 else cores
    return max(1, min(limit, tasks))


class WriteTasks:
    """Runs one write's tasks; :meth:`cancel` (from any thread) stops tasks not yet started."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def run(
        self, tasks: Sequence[Callable[[], T]], workers: int, weights: Sequence[int] | None = None,
        budget: int = PARALLEL_WRITE_BYTES,
    ) -> list[T]:
        """Every task's result, in task order (see the module's contract)."""
        if workers <= 1 or len(tasks) <= 1:
            results = []
            for task in tasks:
                self._check_cancelled()
                results.append(task())
            return results
        done: dict[int, T] = {}
        failures: dict[int, BaseException] = {}
        running: dict[Future[T], int] = {}
        in_flight = 0

        def finish(futures: set[Future[T]]) -> None:
            nonlocal in_flight
            for future in futures:
                index = running.pop(future)
                in_flight -= weights[index] if weights is not None else 0
                failure = future.exception()
                if failure is None:
                    done[index] = future.result()
                else:
                    failures[index] = failure

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tidemark-write") as pool:
            following = 0
            while following < len(tasks) and not failures and not self._cancelled.is_set():
                weight = weights[following] if weights is not None else 0
                if runs_alone(weight, budget):  # it runs alone, in this thread, as the serial
                    # loop would (its pages then come from the heap the index lookup freed them to)
                    finish(wait(running).done)
                    if failures:
                        break
                    try:
                        done[following] = tasks[following]()
                    except Exception as failure:  # noqa: BLE001 - raised below, as the first failure
                        failures[following] = failure
                    following += 1
                elif len(running) < workers and (not running or in_flight + weight <= budget):
                    running[pool.submit(tasks[following])] = following
                    following += 1
                    in_flight += weight
                else:  # waits for a running task to finish
                    finish(wait(running, return_when=FIRST_COMPLETED).done)
            finish(wait(running).done)
        if failures:
            raise failures[min(failures)]
        if len(done) < len(tasks):
            self._check_cancelled()
        return [done[i] for i in range(len(tasks))]

    def pool(self, workers: int) -> TaskPool:
        """A pool for tasks submitted one by one, as their inputs become ready (a pipeline of
        steps); the same contract as :meth:`run`, tasks in submission order."""
        return TaskPool(self, workers)

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise CommitError("the write was cancelled before all of its file groups were written "
                              "(a conflicting write was detected); it is rolled back")


class _NotStarted(Exception):
    """A task that did not start: an earlier one failed, or the write was cancelled."""


class TaskPool:
    """Tasks submitted one by one to ``workers`` threads, started in submission order; made by
    :meth:`WriteTasks.pool`, used as a context manager (leaving it waits for every task).

    Once a task fails (or the write is cancelled) no further task starts; :meth:`result` of any
    task then waits for the running ones and raises the failure of the first failing task, in
    submission order (or the cancellation's CommitError), as :meth:`WriteTasks.run` does.
    """

    def __init__(self, tasks: WriteTasks, workers: int) -> None:
        self._tasks = tasks
        # One worker: each task runs in the calling thread as it is submitted (the serial loop).
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tidemark-write") \
            if workers > 1 else None
        self._failed = threading.Event()
        self._futures: list[Future[object]] = []

    def __enter__(self) -> TaskPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:  # left by an exception: no further task starts
            self._failed.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def submit(self, task: Callable[[], T]) -> Future[T]:
        def guarded() -> T:
            if self._failed.is_set() or self._tasks._cancelled.is_set():
                raise _NotStarted
            try:
                return task()
            except BaseException:
                self._failed.set()
                raise

        if self._executor is not None:
            future = self._executor.submit(guarded)
        else:
            future = Future()
            try:
                future.set_result(guarded())
            except BaseException as failure:  # noqa: BLE001 - raised by result(), as from a thread
                future.set_exception(failure)
        self._futures.append(future)  # type: ignore[arg-type]
        return future

    def result(self, future: Future[T]) -> T:
        """The task's result (the pool lets go of it: a large result is not held until the pool
        closes); see the class for what is raised."""
        try:
            result = future.result()
        except BaseException:
            self._failed.set()
            wait(self._futures)
            for done in self._futures:
                failure = done.exception()
                if failure is not None and not isinstance(failure, _NotStarted):
                    raise failure from None
            self._tasks._check_cancelled()
            raise
        self._futures.remove(future)  # type: ignore[arg-type]
        return result
