"""Start and stop a real, throw-away Spark Connect server for tests.

Follows /work/shared/reference/services.md: the pyspark package carries the Connect server
(``sbin/start-connect-server.sh``). That script daemonizes ``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``; here the same command runs in the
foreground as a process the tests own (on Linux it gets SIGTERM when the thread that started it
exits, so a killed test run leaves no server behind), with ``PYSPARK_PYTHON`` set to this
Python (else the server's Python workers lack pyarrow), logs in a temporary folder, and the
gRPC port bound on 127.0.0.1.

    server = SparkConnectServer().start()     # returns once a client session answers
    spark = server.session()                  # SparkSession.builder.remote(server.url)
    server.stop()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from zookeeper import _parent_death_signal, free_port, stop_process

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


class SparkConnectError(RuntimeError):
    """The test Spark Connect server could not be started."""


def spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def spark_env(workdir: Path) -> dict[str, str]:
    """The environment of Spark processes the tests start: this Python for the Python workers
    (with the PYTHONPATH of this run, so the code under test is the code they import),
    loopback only, logs and pid files in ``workdir``."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=spark_home(),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(workdir / "logs"),
        SPARK_PID_DIR=str(workdir / "pids"),
        SPARK_CONF_DIR=str(workdir / "conf"),
    )
    (workdir / "conf").mkdir(exist_ok=True)
    (workdir / "conf" / "log4j2.properties").write_text(_LOG4J)
    return env


class SparkConnectServer:
    """One Spark Connect server on 127.0.0.1 running ``master`` (local[2] by default)."""

    host = "127.0.0.1"

    def __init__(self, *, master: str = "local[2]", driver_memory: str = "1g", start_timeout: float = 180.0) -> None:
        self.master = master
        self.driver_memory = driver_memory
        self.start_timeout = start_timeout
        self.port = 0
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Path | None = None

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        if self._log_file is None or not self._log_file.exists():
            return ""
        return self._log_file.read_text(errors="replace")[-20000:]

    def session(self) -> Any:
        """A new client session of this server (``SparkSession.builder.remote(url)``)."""
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(self.url).create()

    def start(self) -> SparkConnectServer:
        if self.running:
            return self
        self.workdir = Path(tempfile.mkdtemp(prefix="tidemark-connect-"))
        env = spark_env(self.workdir)
        self.port = free_port(self.host)
        self._log_file = self.workdir / "server.log"
        began = time.monotonic()
        submit = os.path.join(spark_home(), "bin", "spark-submit")
        confs = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.python.filterPushdown.enabled": "true",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{self.workdir}/conf/log4j2.properties",
        }
        command = ["bash", submit, "--master", self.master, "--driver-memory", self.driver_memory,
                   "--name", "tidemark-tests-connect",
                   "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
        for key, value in confs.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        with open(self._log_file, "wb") as log:
            self._proc = subprocess.Popen(
                command, env=env, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_parent_death_signal(),
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_ready(self) -> None:
        import socket

        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise SparkConnectError(
                    f"the Spark Connect server exited with code {self._proc.returncode}; log:\n{self.log_text()}"
                )
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=0.5):
                # The port answers once the gRPC service is up; a first query proves the session works.
                # It runs in a process of its own: a process that makes a Connect session switches
                # PySpark to Connect for good, which would break this run's shared classic session.
                probe = subprocess.run(
                    [sys.executable, "-c", "import sys; from pyspark.sql import SparkSession; "
                     "s = SparkSession.builder.remote(sys.argv[1]).create(); "
                     "assert s.range(1).count() == 1; s.stop()", self.url],
                    capture_output=True, text=True, timeout=120, check=False,
                )
                if probe.returncode == 0:
                    return
            time.sleep(0.5)
        raise SparkConnectError(
            f"the Spark Connect server on {self.url} was not ready within {self.start_timeout:.0f} s; "
            f"log:\n{self.log_text()}"
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, timeout=30)
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
            self.workdir = None

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":  # manual use: python tests/spark_connect_server.py  (runs until Ctrl-C)
    with SparkConnectServer() as server:
        print(f"Spark Connect ready on {server.url} after {server.startup_seconds:.1f} s; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.running:
                time.sleep(1)
