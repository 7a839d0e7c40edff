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
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from server_process import ServerProcess, free_port

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


class SparkConnectServer(ServerProcess):
    """One Spark Connect server on 127.0.0.1 running ``master`` (local[2] by default)."""

    name = "spark-connect"
    error = SparkConnectError
    poll_seconds = 0.5
    stop_timeout = 30.0

    def __init__(self, *, master: str = "local[2]", driver_memory: str = "1g", start_timeout: float = 180.0) -> None:
        super().__init__(start_timeout=start_timeout)
        self.master = master
        self.driver_memory = driver_memory

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

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
        self._launch(command, env=env)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _ready(self) -> bool:
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
            return probe.returncode == 0
        return False


if __name__ == "__main__":  # manual use: python tests/spark_connect_server.py  (runs until Ctrl-C)
    with SparkConnectServer() as server:
        print(f"Spark Connect ready on {server.url} after {server.startup_seconds:.1f} s; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.running:
                time.sleep(1)
