"""Start and stop a real, throw-away ZooKeeper server for tests.

Follows /work/shared/reference/services.md: the Debian ``zookeeper`` package's jar run as a
foreground ``java`` process that the tests own, bound to 127.0.0.1 on a free port, with a
temporary data folder, no admin server, and ``ruok`` whitelisted. Install the jars with
``bash scripts/install-services.sh``.

    server = ZooKeeperServer()
    server.start()            # returns once `ruok` answers `imok`
    ... LockSettings(zk_url=server.url, zk_port=server.port) ...
    server.stop()

On Linux the server gets SIGTERM when the thread that started it exits (PR_SET_PDEATHSIG),
so a test run killed by SIGKILL leaves no ZooKeeper behind on the machine. Start it from a
thread that lives as long as the server should (pytest's main thread does).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import tempfile
import time
import zipfile
from pathlib import Path

from server_process import ServerProcess, free_port

JAVA_DIR = "/usr/share/java"
INSTALL_HINT = "run `bash scripts/install-services.sh` (as root) to install the Debian zookeeper package"
# Needed by ZooKeeperServerMain when zookeeper.jar carries no Class-Path in its manifest
# (the Debian jar does carry one).
_FALLBACK_DEPENDENCIES = ("zookeeper-jute", "slf4j-api", "commons-cli", "commons-io", "metrics-core", "snappy-java")


class ZooKeeperError(RuntimeError):
    """The test ZooKeeper server could not be found or started."""


def _find_jar(stem: str, directory: str = JAVA_DIR) -> str | None:
    """``<dir>/<stem>.jar`` if present, else the newest-looking ``<stem>-<version>.jar``."""
    exact = os.path.join(directory, f"{stem}.jar")
    if os.path.exists(exact):
        return exact
    versioned = sorted(glob.glob(os.path.join(directory, f"{stem}-[0-9]*.jar")))
    return versioned[-1] if versioned else None


def _manifest_class_path(jar: str) -> list[str]:
    try:
        with zipfile.ZipFile(jar) as zf:
            text = zf.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    # Manifest lines are wrapped at 72 bytes; a continuation line starts with one space.
    unwrapped = text.replace("\r\n", "\n").replace("\n ", "")
    for line in unwrapped.splitlines():
        if line.startswith("Class-Path:"):
            return line.split(":", 1)[1].split()
    return []


def zookeeper_class_path() -> str:
    """The class path that runs ZooKeeperServerMain with slf4j-simple logging."""
    jar = os.environ.get("ZOOKEEPER_JAR") or _find_jar("zookeeper")
    if not jar or not os.path.exists(jar):
        raise ZooKeeperError(f"ZooKeeper is not installed (no {JAVA_DIR}/zookeeper.jar): {INSTALL_HINT}")
    entries = [jar]
    manifest = _manifest_class_path(jar)
    if manifest:
        missing = [p for p in manifest if ("jute" in p or "slf4j-api" in p) and not os.path.exists(p)]
        if missing:
            raise ZooKeeperError(f"{jar} needs {missing}, which are missing: {INSTALL_HINT}")
    else:
        for stem in _FALLBACK_DEPENDENCIES:
            dep = _find_jar(stem, os.path.dirname(jar)) or _find_jar(stem)
            if dep:
                entries.append(dep)
    simple = _find_jar("slf4j-simple")
    if simple:
        entries.append(simple)  # without a binding the server logs nothing at all
    return os.pathsep.join(entries)


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer ('' on any socket error)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper server on 127.0.0.1 with its own temporary data folder."""

    url = ServerProcess.host
    name = "zookeeper"
    error = ZooKeeperError
    poll_seconds = 0.05

    def __init__(
        self,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        heap: str = "256m",
        start_timeout: float = 30.0,
    ) -> None:
        super().__init__(start_timeout=start_timeout)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.heap = heap

    def lock_options(self, prefix: str) -> dict[str, str]:
        """Writer options for the ZooKeeper lock provider on this server, under a fresh base path
        (``/<prefix>/<random>``) so tables of different tests never share a lock."""
        import uuid

        return {"hoodie.write.lock.provider": "zookeeper", "hoodie.write.lock.zookeeper.url": self.url,
                "hoodie.write.lock.zookeeper.port": str(self.port),
                "hoodie.write.lock.zookeeper.base_path": f"/{prefix}/{uuid.uuid4().hex[:10]}",
                "hoodie.write.lock.zookeeper.session_timeout_ms": "2000"}

    @property
    def hosts(self) -> str:
        return f"{self.url}:{self.port}"

    def start(self) -> ZooKeeperServer:
        if self.running:
            return self
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperError(f"no `java` on PATH: {INSTALL_HINT}")
        class_path = zookeeper_class_path()
        began = time.monotonic()
        last_error = ""
        for _attempt in range(3):  # the free port can be taken between probing and binding
            self.port = free_port(self.url)
            if self.workdir is None:
                self.workdir = Path(tempfile.mkdtemp(prefix="tidemark-zookeeper-"))
            config = self._write_config()
            self._launch([java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-cp", class_path,
                          "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.admin.enableServer=false",
                          "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)])
            try:
                self._wait_ready()
            except ZooKeeperError as exc:
                last_error = str(exc)
                self._terminate()
                if "Address already in use" in last_error:
                    continue
                self.stop()
                raise
            self.startup_seconds = time.monotonic() - began
            return self
        self.stop()
        raise ZooKeeperError(last_error)

    def _write_config(self) -> Path:
        assert self.workdir is not None
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        config = self.workdir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"minSessionTimeout={self.min_session_timeout_ms}",
                    f"dataDir={data}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.url}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr",
                    "forceSync=no",
                    "",
                ]
            )
        )
        return config

    def _ready(self) -> bool:
        # `imok` means the process runs; `srvr` naming a mode means it also serves requests.
        return four_letter_word(self.url, self.port, "ruok", timeout=0.5) == "imok" and "Mode:" in four_letter_word(
            self.url, self.port, "srvr", timeout=0.5)


if __name__ == "__main__":  # manual use: python tests/zookeeper.py  (runs until Ctrl-C)
    with ZooKeeperServer() as server:
        print(f"ZooKeeper ready on {server.hosts} after {server.startup_seconds:.2f} s; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.running:
                time.sleep(1)
