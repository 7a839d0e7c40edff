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
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from server_process import ServerProcess, free_port

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


class MotoServerError(RuntimeError):
    """The test moto server could not be found or started."""


class MotoServer(ServerProcess):
    """One moto server on 127.0.0.1 (S3 and DynamoDB), owned by the test run."""

    name = "moto"
    error = MotoServerError

    def __init__(self, *, start_timeout: float = 30.0) -> None:
        super().__init__(start_timeout=start_timeout)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

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
        """Start on ``port`` (a free one if None; retried on another if that one is taken)."""
        if self.running:
            return self
        exe = self._executable()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION=REGION)
        last = ""
        for _attempt in range(3):
            self.port = port or free_port(self.host)
            self._launch([exe, "-H", self.host, "-p", str(self.port)], env=env)
            try:
                self._wait_ready()
                return self
            except MotoServerError as exc:
                last = str(exc)
                self._terminate()
                if port is not None:
                    break
        raise MotoServerError(last)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False


if __name__ == "__main__":  # manual use: python tests/moto_server.py
    with MotoServer() as server:
        print(f"moto ready on {server.endpoint}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.running:
                time.sleep(1)
