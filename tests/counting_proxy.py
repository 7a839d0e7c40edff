"""A forwarding HTTP proxy in front of the test S3 server that counts what crosses it.

Point a store's ``aws_endpoint_url`` at :attr:`CountingProxy.endpoint` and every request goes
through it to the real server (moto) unchanged. The proxy tallies requests by HTTP method and
by kind (LIST = a GET with ``list-type=2``; POST is S3's batch delete), the prefixes listed
(tagged ``delimited``, one folder level, or ``recursive``, everything under the prefix), the
bytes of every response body, and the ranges of ranged GETs; so a test can assert how much a
read really downloaded and what a commit listed.

    with CountingProxy(moto_server.port) as proxy:
        ... storage opened with dict(options, aws_endpoint_url=proxy.endpoint) ...
        proxy.take()   # -> Tally(requests={"GET": 2, "HEAD": 1}, body_bytes={"GET": 81234}, ...)

Used by ``tests/test_object_store_ranges.py`` (bytes a footer read moves),
``tests/test_object_store_requests.py`` (a commit's requests stay constant) and
``benchmarks/bench_object_store.py`` (requests per commit).
"""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

KINDS = ("LIST", "GET", "HEAD", "PUT", "POST", "DELETE")


@dataclass
class Tally:
    """What crossed the proxy: requests and response body bytes by HTTP method, requests by
    kind (:data:`KINDS`), the prefixes listed, and the ``Range`` of every ranged GET."""

    requests: Counter[str] = field(default_factory=Counter)
    body_bytes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    listed: Counter[str] = field(default_factory=Counter)
    ranges: list[str] = field(default_factory=list)


class CountingProxy:
    """A threaded proxy on 127.0.0.1 forwarding to ``127.0.0.1:target_port`` (thread-safe)."""

    def __init__(self, target_port: int) -> None:
        self._lock = threading.Lock()
        self._tally = Tally()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                kind = "LIST" if self.command == "GET" and "list-type" in query else self.command
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                with proxy._lock:
                    tally = proxy._tally
                    tally.requests[self.command] += 1
                    tally.body_bytes[self.command] += len(data)
                    tally.kinds[kind] += 1
                    if kind == "LIST":
                        how = "delimited" if "delimiter" in query else "recursive"
                        tally.listed[f"{query.get('prefix', [''])[0]} ({how})"] += 1
                    if self.command == "GET" and self.headers.get("Range"):
                        tally.ranges.append(self.headers["Range"])
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                # A HEAD answer has no body but tells the object's length: pass that on.
                size = answer.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", size or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def take(self) -> Tally:
        """What crossed since the last ``take`` (and start counting afresh)."""
        with self._lock:
            tally, self._tally = self._tally, Tally()
        return tally

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
