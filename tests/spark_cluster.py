"""Start and stop a real, throw-away Spark standalone cluster for tests: a master and two
workers, each a JVM of its own, from the pyspark package, on 127.0.0.1.

Follows /work/shared/reference/services.md: ``$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P`` and ``...worker.Worker
--cores 1 --memory M spark://127.0.0.1:P``. Executors then run in JVMs of their own, started
by the workers, with Python workers of this Python (``PYSPARK_PYTHON``). Each process gets
SIGTERM when the thread that started it exits (Linux), so a killed test run leaves no cluster.

    cluster = SparkCluster().start()     # returns once both workers registered
    cluster.master_url                   # spark://127.0.0.1:P, for SparkSession.builder.master
    cluster.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from server_process import _parent_death_signal, free_port, stop_process
from spark_connect_server import spark_env, spark_home


class SparkClusterError(RuntimeError):
    """The test Spark cluster could not be started."""


class SparkCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores each, on 127.0.0.1."""

    host = "127.0.0.1"

    def __init__(self, *, workers: int = 2, cores: int = 1, worker_memory: str = "1g",
                 daemon_memory: str = "256m", start_timeout: float = 180.0) -> None:
        self.workers = workers
        self.cores = cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.port = 0
        self.web_port = 0
        self.workdir: Path | None = None
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    def driver_conf(self, executor_memory: str = "512m") -> dict[str, str]:
        """Settings of a driver on this cluster: one executor of one core per worker."""
        return {
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.driver.memory": "1g",
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.workers * self.cores),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.python.filterPushdown.enabled": "true",
        }

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self.workdir is not None
        env = spark_env(self.workdir)
        env["SPARK_DAEMON_MEMORY"] = self.daemon_memory
        env["SPARK_WORKER_DIR"] = str(self.workdir / f"{name}-work")
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it open
        try:
            proc = subprocess.Popen(
                ["bash", os.path.join(spark_home(), "bin", "spark-class"), *args], env=env, cwd=self.workdir,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_parent_death_signal(),
            )
        finally:
            log.close()
        self._procs.append(proc)
        return proc

    def logs(self) -> str:
        if self.workdir is None:
            return ""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in self.workdir.glob("*.log"))

    def start(self) -> SparkCluster:
        if self._procs:
            return self
        self.workdir = Path(tempfile.mkdtemp(prefix="tidemark-cluster-"))
        self.port, self.web_port = free_port(self.host), free_port(self.host)
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", self.host,
                                   "--port", str(self.port), "--webui-port", str(self.web_port)])
            self._wait(lambda state: True, "the master")
            for n in range(self.workers):
                self._spawn(f"worker-{n}", ["org.apache.spark.deploy.worker.Worker", "--host", self.host,
                                            "--cores", str(self.cores), "--memory", self.worker_memory,
                                            "--webui-port", str(free_port(self.host)), self.master_url])
            self._wait(lambda state: sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= self.workers,
                       f"{self.workers} workers")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise SparkClusterError(f"a cluster process exited with {proc.returncode}:\n{self.logs()}")
            url = f"http://{self.host}:{self.web_port}/json/"
            with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=2) as answer:
                if ready(json.loads(answer.read())):
                    return
            time.sleep(0.5)
        raise SparkClusterError(f"{what} of the Spark cluster not up within {self.start_timeout:.0f} s:\n{self.logs()}")

    def stop(self) -> None:
        procs, self._procs = self._procs, []
        for proc in reversed(procs):  # workers first: they would try to reconnect to the master
            stop_process(proc, timeout=30)
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
            self.workdir = None

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":  # manual use: python tests/spark_cluster.py  (runs until Ctrl-C)
    with SparkCluster() as cluster:
        print(f"Spark cluster ready at {cluster.master_url}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
