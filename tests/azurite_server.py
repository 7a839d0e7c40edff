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
import urllib.request
from pathlib import Path

from server_process import ServerProcess, free_port

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


class AzuriteServer(ServerProcess):
    """One Azurite Blob server on 127.0.0.1, in memory, owned by the test run."""

    name = "azurite"
    error = AzuriteServerError
    poll_seconds = 0.2

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        super().__init__(start_timeout=start_timeout)

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
        if self.running:
            return self
        exe = azurite_executable()
        if exe is None:
            raise AzuriteServerError("Azurite is not installed: run `bash scripts/setup.sh` (installs it with npm "
                                     "into .tools/azurite)")
        self.port = free_port(self.host)
        self._launch([exe, "--blobHost", self.host, "--blobPort", str(self.port), "--inMemoryPersistence",
                      "--skipApiVersionCheck", "--silent"])
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1):
            return True
        return False

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
