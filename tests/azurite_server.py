"""Start and stop a real, throw-away Azure Blob Storage server (Azurite) for tests.

Azurite is Microsoft's Azure Storage emulator, an npm package; ``scripts/install-services.sh``
installs it into ``.tools/azurite`` (with the machine's Node.js). ``azurite-blob --blobHost
127.0.0.1 --blobPort P --inMemoryPersistence`` serves the Blob API, conditional puts
(``If-None-Match: *``, ``If-Match``) included, for the emulator's well-known account.

    server = AzuriteServer().start()         # returns once the port answers
    server.create_container("tables")        # a signed Create Container request
    opts = server.storage_options()          # azure_storage_account_name/_key, azure_endpoint, ...
    server.stop()
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import hmac
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from zookeeper import _parent_death_signal, free_port, stop_process

ROOT = Path(__file__).resolve().parents[1]
# The emulator's fixed development account (public, documented by Microsoft; not a secret).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
API_VERSION = "2021-08-06"


class AzuriteServerError(RuntimeError):
    """Azurite could not be found or started."""


def azurite_executable() -> str | None:
    local = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    return shutil.which("azurite-blob")


class AzuriteServer:
    """One Azurite Blob server on 127.0.0.1, in memory, owned by the test run."""

    host = "127.0.0.1"

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/{ACCOUNT}"

    def storage_options(self) -> dict[str, str]:
        """The storage options (delta-rs / hudi-rs keys) that reach this server."""
        return {
            "azure_storage_account_name": ACCOUNT,
            "azure_storage_account_key": KEY,
            "azure_endpoint": self.endpoint,
            "azure_allow_http": "true",
        }

    def start(self) -> AzuriteServer:
        if self._proc is not None and self._proc.poll() is None:
            return self
        exe = azurite_executable()
        if exe is None:
            raise AzuriteServerError("Azurite is not installed: run `bash scripts/setup.sh` (installs it with npm "
                                     "into .tools/azurite)")
        self._workdir = Path(tempfile.mkdtemp(prefix="tidemark-azurite-"))
        self.port = free_port(self.host)
        log = open(self._workdir / "azurite.log", "wb")  # noqa: SIM115 - owned by the process
        try:
            self._proc = subprocess.Popen(
                [exe, "--blobHost", self.host, "--blobPort", str(self.port), "--inMemoryPersistence",
                 "--skipApiVersionCheck", "--silent"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._workdir,
                preexec_fn=_parent_death_signal(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                text = (self._workdir / "azurite.log").read_text(errors="replace")[-4000:]
                self.stop()
                raise AzuriteServerError(f"azurite-blob exited:\n{text}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1):
                return self
            time.sleep(0.2)
        self.stop()
        raise AzuriteServerError(f"azurite-blob not listening on {self.host}:{self.port} in {self.start_timeout:.0f} s")

    def create_container(self, name: str) -> str:
        """Create a container with a Shared Key signed request (obstore has no call for it)."""
        date = email.utils.formatdate(usegmt=True)
        content_type = "application/octet-stream"
        # The Blob service's string to sign: verb, 11 standard headers, x-ms-* headers, resource.
        to_sign = "\n".join(["PUT", "", "", "", "", content_type, "", "", "", "", "", "",
                             f"x-ms-date:{date}", f"x-ms-version:{API_VERSION}",
                             f"/{ACCOUNT}/{ACCOUNT}/{name}", "restype:container"])
        signature = base64.b64encode(hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest())
        request = urllib.request.Request(
            f"{self.endpoint}/{name}?restype=container", method="PUT", data=b"",
            headers={"x-ms-date": date, "x-ms-version": API_VERSION, "Content-Type": content_type,
                     "Authorization": f"SharedKey {ACCOUNT}:{signature.decode()}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 201, answer.status
        return name

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc)
        if self._workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._workdir)
            self._workdir = None

    def __enter__(self) -> AzuriteServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
