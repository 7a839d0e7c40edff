"""What a Spark session offers, classic (py4j, a JVM in this process) or Spark Connect.

A Spark Connect session (``SparkSession.builder.remote("sc://host:port")``) has no
``sparkContext``, ``_jdf`` or ``_jvm``: the driver is the Connect server, elsewhere. The few
things the Spark engine needs beyond DataFrames are here, each with its Connect way:

=======================  =================================  ======================================
need                     classic                            Spark Connect
=======================  =================================  ======================================
cancel a write's job     job group, interrupting its tasks  operation tag, ``interruptTag``
wait for a failed job's  its stages' active tasks           the time Spark takes at most to kill
  tasks to stop          (status tracker)                   them (no status API)
default parallelism      ``sparkContext.defaultParallelism``  the splits Spark gives a leaf (plan)
size estimate of a plan  the optimized plan's statistics    the same, from ``explain("cost")``
drop a local checkpoint  unpersist its RDD now              the server drops it when the client's
                                                            DataFrames are garbage collected
where tasks reach a      ``spark.driver.host`` (loopback    this machine's address on the route
server in this process   in local mode)                     to the Connect server
=======================  =================================  ======================================

Tasks run in Python workers either way (``mapInArrow``, ``applyInArrow``), so everything they
do is the same.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

_LOOPBACK = "127.0.0.1"
_parallelism: dict[str, int] = {}  # by Connect session id
_parallelism_lock = threading.Lock()


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client of a remote driver)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # the Connect client's packages (grpcio, ...) are not installed
        return False
    return isinstance(spark, ConnectSession)


def default_parallelism(spark: Any) -> int:
    """How many tasks Spark runs at once by default (the cores of the cluster, or of local[N])."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    key = str(spark.session_id)
    with _parallelism_lock:
        if key not in _parallelism:
            _parallelism[key] = _connect_parallelism(spark)
        return _parallelism[key]


def _connect_parallelism(spark: Any) -> int:
    # Spark gives a Range leaf the session's default parallelism as its splits: an analysis
    # on the server, no job.
    with contextlib.suppress(Exception):
        found = re.search(r"splits=(\d+)", spark.range(1)._explain_string(mode="simple"))
        if found:
            return max(1, int(found.group(1)))
    with contextlib.suppress(Exception):
        return max(1, int(spark.conf.get("spark.default.parallelism")))
    return 2


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}
_STATS = re.compile(r"Statistics\(sizeInBytes=([0-9.E+]+)\s*([KMGTPE]?i?B)")


def estimated_bytes(frame: Any) -> int | None:
    """Spark's estimate of ``frame``'s size, or None where the plan cannot tell (a Python list
    or an RDD, which Spark sizes at its huge default) or the estimate is not available."""
    if is_connect(frame.sparkSession):
        try:
            return size_from_explain(frame._explain_string(mode="cost"))
        except Exception:  # noqa: BLE001 - an estimate is optional
            return None
    size = int(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    return size if size < (1 << 60) else None


def size_from_explain(text: str) -> int | None:
    """The root's ``sizeInBytes`` in the optimized plan of ``explain("cost")`` text (Spark prints
    it rounded, as ``1800.0 B`` or ``1.2 MiB``), or None when absent or Spark's huge default."""
    optimized = text.split("== Optimized Logical Plan ==", 1)[-1]
    found = _STATS.search(optimized)  # the first one is the plan's root
    if found is None:
        return None
    size = int(float(found.group(1)) * _UNITS.get(found.group(2), 1))
    return size if size < (1 << 60) else None


def release_checkpoint(frame: Any) -> None:
    """Free the blocks of a local checkpoint now (classic). On Connect the server frees a
    checkpoint once no client DataFrame refers to it any more; nothing to do here."""
    if not is_connect(frame.sparkSession):
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)  # a LogicalRDD


def task_reachable_host(spark: Any) -> str:
    """The address at which Spark tasks reach a server that this process runs.

    Classic: the driver is this process: loopback in local mode, else ``spark.driver.host``.
    Connect: this process is a client; the tasks run where the Connect server runs them, so
    the answer is this machine's address on its route to the Connect server (loopback when the
    server is on this machine).
    """
    if not is_connect(spark):
        master = spark.conf.get("spark.master", "local") or "local"
        if master.startswith("local"):
            return _LOOPBACK
        return spark.conf.get("spark.driver.host", None) or _LOOPBACK
    try:
        builder = spark.client._builder
        host, port = str(builder.host), int(builder.port)
    except Exception:  # noqa: BLE001 - private client API; loopback is right for a local server
        return _LOOPBACK
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((socket.gethostbyname(host), port))  # a route lookup; nothing is sent
            address = str(probe.getsockname()[0])
    except OSError:
        return _LOOPBACK
    return _LOOPBACK if address.startswith("127.") else address


class JobHandle:
    """Runs the jobs of one ``with`` body under a name that :meth:`cancel` can stop, from any
    thread: a job group (tasks interrupted) on a classic session, an operation tag on Connect."""

    def __init__(self, spark: Any, name: str, description: str) -> None:
        self.spark = spark
        self.name = f"{name}-{uuid.uuid4().hex[:8]}"  # unique among concurrent writes
        self.description = description
        self.connect = is_connect(spark)
        self._active = False

    @contextlib.contextmanager
    def running(self, *, interrupt: bool = True) -> Iterator[JobHandle]:
        """Jobs started in the body run under this handle's name. A body that fails raises only
        once the jobs' tasks stopped (:meth:`wait_for_tasks`), so that what the caller does next
        (roll the write back) races no task; not if Spark refused the plan (no task ran)."""
        try:
            with self._named(interrupt=interrupt):
                yield self
        except Exception as failure:
            from pyspark.errors import AnalysisException

            if not isinstance(failure, AnalysisException):
                self.wait_for_tasks()
            raise

    @contextlib.contextmanager
    def _named(self, *, interrupt: bool) -> Iterator[None]:
        if self.connect:
            self.spark.addTag(self.name)
            self._active = True
            try:
                yield
            finally:
                self._active = False
                self.spark.removeTag(self.name)
            return
        sc = self.spark.sparkContext
        keys = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
        saved = {key: sc.getLocalProperty(key) for key in keys}  # the caller's own job group, if any
        sc.setJobGroup(self.name, self.description, interruptOnCancel=interrupt)
        self._active = True
        try:
            yield
        finally:
            self._active = False
            for key, value in saved.items():
                sc.setLocalProperty(key, value)

    def wait_for_tasks(self) -> None:
        """Return once no task of this handle's jobs is still running, after they failed or were
        cancelled.

        Spark reports a failed job at once, while the job's other tasks run on: it marks them
        killed, and its Python runner notices within 2 s and kills the task's Python worker
        ``spark.python.task.killTimeout`` later. Classic: waits until the jobs' stages have no
        active task, at most that long. Connect has no status API: waits that long.
        """
        deadline = time.monotonic() + _KILL_POLL_S + _kill_timeout_s(self.spark) + _KILL_MARGIN_S
        if self.connect:
            time.sleep(max(0.0, deadline - time.monotonic()))
            return
        tracker = self.spark.sparkContext.statusTracker()
        while time.monotonic() < deadline:
            active = 0
            for job_id in tracker.getJobIdsForGroup(self.name):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    active += stage.numActiveTasks if stage is not None else 0
            if not active:
                return
            time.sleep(0.05)

    def cancel(self) -> None:
        """Stop the jobs started under this handle (no-op once the ``with`` body has ended)."""
        if not self._active:
            return
        if self.connect:
            self.spark.interruptTag(self.name)
        else:
            self.spark.sparkContext.cancelJobGroup(self.name)


_KILL_POLL_S = 2.0  # how often Spark's Python runner looks whether its task was killed
_KILL_MARGIN_S = 1.0  # for the kill request to reach the executor
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*$")


def _kill_timeout_s(spark: Any) -> float:
    """``spark.python.task.killTimeout`` in seconds (Spark's default: 2 s)."""
    try:
        text = str(spark.conf.get("spark.python.task.killTimeout", "2s"))
    except Exception:  # noqa: BLE001 - a session that cannot say: Spark's default
        return 2.0
    found = _DURATION.match(text)
    if found is None:
        return 2.0
    value, unit = float(found.group(1)), found.group(2) or "ms"
    return value / 1000 if unit == "ms" else value * 60 if unit in ("m", "min") else value
