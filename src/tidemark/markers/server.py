"""Timeline-server-based markers: a small HTTP marker server in the driver, for one write.

Tasks do not touch the file system for markers; they send each marker to the
server, which writes requests in batches into one of ``num_threads`` files
``MARKERS0`` .. ``MARKERS<n-1>`` (next to ``MARKERS.type``, in the write's
marker folder). A request is written as soon as a file is free; requests that
arrive while every file is being written are batched together (group commit),
so the number of writes stays bounded under load without making a lone request
wait; ``batch_interval_ms`` only paces the batcher when it is idle. A request is acknowledged only
after its batch was written to the file system, so a driver crash loses no
acknowledged marker — rollback and partial-file clean-up read the files back
(:mod:`tidemark.markers.listing`). Many thousand markers become a few files:
cheaper to create, list and delete than one file each.

Each ``MARKERS<n>`` file is rewritten whole and atomically (temp file + rename),
so readers in other writers never see a torn file.

With the ``async_timeline_server`` early-conflict strategy the server also runs
the :class:`~tidemark.markers.early_conflict.AsyncConflictChecker`; once it
found a conflict every further marker request is refused with it (HTTP 409), and
``on_conflict`` lets the driver cancel its running tasks at once.

Protocol (JSON): ``POST /v1/markers {"marker": "<data file>.marker.<IO>"}`` ->
200 ``{"created": bool}`` | 409 ``{"conflict": {...}}``; ``GET /v1/markers``;
``GET /v1/conflict``.
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tidemark.errors import CommitError, EarlyConflictError
from tidemark.markers.base import IOType, Marker, parse_marker
from tidemark.markers.listing import write_markers_file, write_markers_type
from tidemark.storage import Storage

if TYPE_CHECKING:
    from tidemark.config.early_conflict import EarlyConflictSettings
    from tidemark.markers.early_conflict import AsyncConflictChecker, EarlyConflict

log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 120.0


class MarkerServerError(CommitError):
    """The marker server could not record a marker (or could not be reached)."""


@dataclass
class _Request:
    marker: Marker
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class MarkerServer:
    """Serves marker requests of one write; start it before the tasks, stop it after them."""

    def __init__(
        self,
        storage: Storage,
        instant_time: str,
        *,
        host: str = "127.0.0.1",
        batch_interval_ms: int = 50,
        num_threads: int = 20,
        early_conflict: EarlyConflictSettings | None = None,
        on_conflict: Callable[[EarlyConflict], None] | None = None,
    ) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.host = host
        self.batch_interval_ms = batch_interval_ms
        self.num_threads = num_threads
        self.early_conflict = early_conflict
        self.on_conflict = on_conflict
        self._markers: set[Marker] = set()  # flushed, i.e. acknowledged or about to be
        self._file_contents: list[list[str]] = [[] for _ in range(num_threads)]
        self._free_files: queue.Queue[int] = queue.Queue()
        for index in range(num_threads):
            self._free_files.put(index)
        self._pending: queue.Queue[_Request] = queue.Queue()
        self._state = threading.Lock()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="tidemark-markers")
        self._httpd: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self.checker: AsyncConflictChecker | None = None
        self.batches_written = 0

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> MarkerServer:
        write_markers_type(self.storage, self.instant_time)
        self._httpd = ThreadingHTTPServer((self.host, 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._threads = [
            threading.Thread(target=self._httpd.serve_forever, name="tidemark-marker-server", daemon=True),
            threading.Thread(target=self._batch_loop, name="tidemark-marker-batcher", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        if self.early_conflict is not None:
            from tidemark.markers.early_conflict import AsyncConflictChecker, ConflictDetector

            detector = ConflictDetector(self.storage, self.early_conflict)
            self.checker = AsyncConflictChecker(detector, self.markers, self._conflict_found).start()
        return self

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the marker server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        """Stop serving; markers already requested are flushed first."""
        if self.checker is not None:
            self.checker.stop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._flush_now()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> MarkerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state ------------------------------------------------------------------------------
    @property
    def conflict(self) -> EarlyConflict | None:
        return self.checker.conflict if self.checker is not None else None

    def conflict_error(self) -> EarlyConflictError | None:
        conflict = self.conflict
        if conflict is None or self.early_conflict is None:
            return None
        return conflict.error(self.early_conflict)

    def final_check(self) -> None:
        """Once all tasks are done: run the checker one last time (it may not have run since the
        last markers arrived) and raise the conflict it found, before the write commits."""
        if self.checker is None:
            return
        self.checker.stop()
        if self.checker.conflict is None:
            self.checker.check_now()
        error = self.conflict_error()
        if error is not None:
            raise error

    def markers(self) -> list[Marker]:
        with self._state:
            return list(self._markers)

    def _conflict_found(self, conflict: EarlyConflict) -> None:
        log.warning(
            "write %s: early conflict on %s/%s with %s (%s)",
            self.instant_time, conflict.partition_path, conflict.file_id, conflict.conflicting_instant, conflict.reason,
        )
        if self.on_conflict is not None:
            self.on_conflict(conflict)

    # -- marker requests ---------------------------------------------------------------------
    def create(self, marker: Marker) -> bool:
        """Record ``marker``; returns once it is written (False if it existed already).

        Raises EarlyConflictError once the checker found a conflict, MarkerServerError
        if the batch could not be written.
        """
        error = self.conflict_error()
        if error is not None:
            raise error
        with self._state:
            if marker in self._markers:
                return False
        request = _Request(marker)
        self._pending.put(request)
        if not request.done.wait(ACK_TIMEOUT_S):
            raise MarkerServerError(f"marker {marker.name} not flushed within {ACK_TIMEOUT_S:.0f} s")
        if request.error is not None:
            raise MarkerServerError(f"could not write marker {marker.name}: {request.error}")
        return True

    def _batch_loop(self) -> None:
        # Group commit: a request is written as soon as a MARKERS file is free; requests that
        # arrive while all files are being written wait and go together in the next batch.
        # At low load a marker costs one small file write, not a batch interval.
        while not self._stop.is_set():
            try:
                first = self._pending.get(timeout=self.batch_interval_ms / 1000)
            except queue.Empty:
                continue
            index = self._free_files.get()  # one writer per MARKERS file at a time
            batch = [first, *self._drain()]
            self._pool.submit(self._write_batch, index, batch)

    def _drain(self) -> list[_Request]:
        batch = []
        while True:
            try:
                batch.append(self._pending.get_nowait())
            except queue.Empty:
                return batch

    def _flush_now(self, *, wait: bool = True) -> None:
        batch = self._drain()
        if not batch:
            return
        index = self._free_files.get()  # one writer per MARKERS file at a time
        future = self._pool.submit(self._write_batch, index, batch)
        if wait:
            future.result()

    def _write_batch(self, index: int, batch: list[_Request]) -> None:
        try:
            with self._state:
                fresh = [r.marker for r in batch if r.marker not in self._markers]
            lines = self._file_contents[index] + sorted({m.name for m in fresh})
            write_markers_file(self.storage, self.instant_time, index, lines)  # before the ack
            self._file_contents[index] = lines
            with self._state:
                self._markers.update(fresh)
            self.batches_written += 1
        except BaseException as exc:  # noqa: BLE001 - every waiting request must learn of it
            for request in batch:
                request.error = exc
        finally:
            self._free_files.put(index)
            for request in batch:
                request.done.set()


def _handler_for(server: MarkerServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection per task
        # The reply goes out as headers then body; with Nagle's algorithm on, the body waits for
        # the client's delayed ACK of the headers (~40 ms per marker).
        disable_nagle_algorithm = True

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length") or 0)
            try:
                payload = json.loads(self.rfile.read(length) or b"{}")
                marker = parse_marker(str(payload.get("marker", "")))
            except ValueError:
                marker = None
            if self.path != "/v1/markers" or marker is None:
                self._reply(400, {"error": "POST /v1/markers with {\"marker\": \"<file>.marker.<IO>\"}"})
                return
            try:
                created = server.create(marker)
            except EarlyConflictError as conflict:
                self._reply(409, {"conflict": conflict.payload()})
            except MarkerServerError as exc:
                self._reply(500, {"error": str(exc)})
            else:
                self._reply(200, {"created": created})

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path == "/v1/markers":
                self._reply(200, {"markers": sorted(m.name for m in server.markers())})
            elif self.path == "/v1/conflict":
                error = server.conflict_error()
                self._reply(200, {"conflict": error.payload() if error else None})
            else:
                self._reply(404, {"error": f"no such endpoint {self.path}"})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request logs
            log.debug("marker server: " + format, *args)

    return Handler


class MarkerServerClient:
    """What a task uses to create markers through the driver's marker server."""

    def __init__(self, url: str, instant_time: str, *, timeout_s: float = ACK_TIMEOUT_S + 10) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.instant_time = instant_time
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in range(2):  # a kept-alive connection the server closed: reconnect once
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
                self._conn.connect()
                self._conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._conn.request(method, path, body=data, headers=headers)
                response = self._conn.getresponse()
                return response.status, json.loads(response.read() or b"{}")
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt == 1:
                    raise MarkerServerError(
                        f"marker server at {self.host}:{self.port} unreachable for write {self.instant_time}: {exc}",
                        instant_time=self.instant_time,
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def create(self, data_file: str, io_type: IOType) -> None:
        started = time.monotonic()
        status, body = self._request("POST", "/v1/markers", {"marker": Marker(data_file, io_type).name})
        if status == 409 and body.get("conflict"):
            raise EarlyConflictError(**body["conflict"])
        if status != 200:
            raise MarkerServerError(
                f"marker server refused {data_file}: HTTP {status} {body.get('error', '')}",
                instant_time=self.instant_time,
            )
        log.debug("marker for %s acknowledged in %.1f ms", data_file, (time.monotonic() - started) * 1000)

    def markers(self) -> list[str]:
        status, body = self._request("GET", "/v1/markers")
        return list(body.get("markers", [])) if status == 200 else []

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
