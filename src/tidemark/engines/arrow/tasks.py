"""The Arrow engine's write tasks on a bounded pool of threads: file groups written side by side.

pyarrow releases the GIL while it takes rows, encodes and compresses parquet and hashes keys,
so file groups written on threads keep every core busy, as Spark's tasks would. The contract
is the serial one's:

* results come back in task order (the write statistics, hence the commit metadata, do not
  depend on which thread finished first);
* at most ``workers`` tasks run at once and a task is started only when a thread is free: each
  task takes its own rows when it starts, so no more file groups are in memory than threads;
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

    def run(self, tasks: Sequence[Callable[[], T]], workers: int) -> list[T]:
        """Every task's result, in task order (see the module's contract)."""
        if workers <= 1 or len(tasks) <= 1:
            results = []
            for task in tasks:
                self._check_cancelled()
                results.append(task())
            return results
        done: dict[int, T] = {}
        failures: dict[int, BaseException] = {}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tidemark-write") as pool:
            running: dict[Future[T], int] = {}
            queued = iter(range(len(tasks)))
            while True:
                while len(running) < workers and not failures and not self._cancelled.is_set():
                    index = next(queued, None)
                    if index is None:
                        break
                    running[pool.submit(tasks[index])] = index
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    index = running.pop(future)
                    failure = future.exception()
                    if failure is None:
                        done[index] = future.result()
                    else:
                        failures[index] = failure
        if failures:
            raise failures[min(failures)]
        if len(done) < len(tasks):
            self._check_cancelled()
        return [done[i] for i in range(len(tasks))]

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise CommitError("the write was cancelled before all of its file groups were written "
                              "(a conflicting write was detected); it is rolled back")
