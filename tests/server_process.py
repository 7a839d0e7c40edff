"""A throw-away server process owned by the test run: the part every test server shares.

ZooKeeper, moto (S3 + DynamoDB), Azurite and Spark Connect are each started the same way: a
free port on 127.0.0.1, a temporary work folder, the process's output in a log file there, a
readiness poll that gives up with the log when the process dies or the time runs out, and a
stop that terminates the process (SIGKILL if it lingers) and removes the folder. A subclass says
how to launch its server and when it is ready (:meth:`ServerProcess._ready`).

On Linux a server gets SIGTERM when the thread that started it exits (``PR_SET_PDEATHSIG``), so
a test run killed by SIGKILL leaves no server behind on the machine. Start servers from a thread
that lives as long as they should (pytest's main thread does).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (it can be taken before it is bound: retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _parent_death_signal() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)

    return set_pdeathsig


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM a server process the tests own, SIGKILL it if it lingers past ``timeout``, and reap it."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class ServerProcess:
    """One server process on ``host``: launched by :meth:`_launch`, awaited by :meth:`_wait_ready`.

    Subclasses set ``name`` (for folders, logs and messages) and ``error`` (the exception they
    raise), implement ``start()`` with :meth:`_launch` and :meth:`_wait_ready`, and :meth:`_ready`.
    """

    host = "127.0.0.1"
    name = "server"
    error: type[RuntimeError] = RuntimeError
    poll_seconds = 0.1
    stop_timeout = 10.0

    def __init__(self, *, start_timeout: float) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Path | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        """The end of the current process's log ('' before the first start)."""
        if self._log_file is None or not self._log_file.exists():
            return ""
        return self._log_file.read_text(errors="replace")[-20000:]

    def _launch(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        """Start ``argv`` in the work folder (made on first use) with its output in a log of its own."""
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"tidemark-{self.name}-"))
        self._log_file = self.workdir / f"{self.name}-{self.port}.log"
        with open(self._log_file, "wb") as log:
            self._proc = subprocess.Popen(
                list(argv), cwd=self.workdir, env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_parent_death_signal(),
            )

    def _ready(self) -> bool:
        """Whether the launched server answers; polled by :meth:`_wait_ready`."""
        raise NotImplementedError

    def _wait_ready(self) -> None:
        """Return once :meth:`_ready`; raise ``error`` with the log if the process exits or the time runs out."""
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise self.error(f"{self.name} exited with code {self._proc.returncode} while starting on "
                                 f"{self.host}:{self.port}; log:\n{self.log_text()}")
            if self._ready():
                return
            time.sleep(self.poll_seconds)
        raise self.error(f"{self.name} on {self.host}:{self.port} was not ready within {self.start_timeout:.0f} s; "
                         f"log:\n{self.log_text()}")

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, timeout=self.stop_timeout)

    def stop(self) -> None:
        """Stop the process and remove its work folder (its data and logs)."""
        self._terminate()
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
            self.workdir = None

    def start(self) -> Self:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
