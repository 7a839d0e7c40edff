"""Start and stop a real, throw-away S3 + DynamoDB server (moto's standalone server) for tests.

See /work/shared/reference/services.md: ``moto_server -H 127.0.0.1 -p P`` from ``moto[server]``
serves S3 (with ``If-None-Match``/``If-Match`` conditional puts) and DynamoDB, in memory.

    server = MotoServer().start()     # returns once GET /moto-api/ answers
    server.create_bucket("b")
    opts = server.storage_options()   # aws_endpoint_url, keys, region, aws_allow_http
    server.stop()

``stop()`` followed by ``start(port=server.port)`` restarts it on the same port (its contents are
lost: it keeps everything in memory), for fault tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from zookeeper import _parent_death_signal, free_port, stop_process

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


class MotoServerError(RuntimeError):
    """The test moto server could not be found or started."""


class MotoServer:
    """One moto server on 127.0.0.1 (S3 and DynamoDB), owned by the test run."""

    host = "127.0.0.1"

    def __init__(self, *, start_timeout: float = 30.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def storage_options(self) -> dict[str, str]:
        """The storage options hudi-rs, delta-rs and tidemark take for this server."""
        return {
            "aws_endpoint_url": self.endpoint,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_region": REGION,
            "aws_allow_http": "true",
        }

    def boto3_client(self, service: str = "s3") -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, name: str) -> str:
        self.boto3_client("s3").create_bucket(Bucket=name)
        return name

    def _executable(self) -> str:
        candidate = Path(sys.executable).with_name("moto_server")
        if candidate.exists():
            return str(candidate)
        found = shutil.which("moto_server")
        if found is None:
            raise MotoServerError("moto_server is not installed: run `bash scripts/setup.sh` (installs moto[server])")
        return found

    def start(self, port: int | None = None) -> MotoServer:
        if self.running:
            return self
        exe = self._executable()
        self._workdir = Path(tempfile.mkdtemp(prefix="tidemark-moto-"))
        last = ""
        for _attempt in range(3):
            self.port = port or free_port(self.host)
            log = open(self._workdir / f"moto-{self.port}.log", "wb")  # noqa: SIM115 - owned by the process
            env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                       AWS_DEFAULT_REGION=REGION)
            self._proc = subprocess.Popen(
                [exe, "-H", self.host, "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                preexec_fn=_parent_death_signal(),
            )
            log.close()
            try:
                self._wait_ready()
                return self
            except MotoServerError as exc:
                last = str(exc)
                self._terminate()
                if port is not None:
                    break
        raise MotoServerError(last)

    def _log_text(self) -> str:
        if self._workdir is None:
            return ""
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in self._workdir.glob("*.log"))

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise MotoServerError(f"moto_server exited with {self._proc.returncode}:\n{self._log_text()}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise MotoServerError(f"moto_server on {self.endpoint} not ready in {self.start_timeout:.0f} s")

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc)

    def stop(self) -> None:
        self._terminate()
        if self._workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._workdir)
            self._workdir = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":  # manual use: python tests/moto_server.py
    with MotoServer() as server:
        print(f"moto ready on {server.endpoint}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.running:
                time.sleep(1)
