"""A counting HTTP proxy in front of the moto S3 server: requests by kind, and the prefixes listed.

Used by ``benchmarks/bench_object_store.py`` (requests per commit) and
``tests/test_object_store_requests.py`` (a commit's requests stay constant). LIST = a GET
with ``list-type=2``, tagged by its prefix as ``delimited`` (one folder level) or
``recursive`` (everything under the prefix); POST is S3's batch delete.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.parse
from collections import Counter
from typing import Any

KINDS = ("LIST", "GET", "HEAD", "PUT", "POST", "DELETE")


class CountingProxy:
    """A forwarding HTTP proxy in front of moto that counts requests by kind (thread-safe)."""

    def __init__(self, target_port: int) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                kind = "LIST" if self.command == "GET" and "list-type" in query else self.command
                with proxy.lock:
                    proxy.counts[kind] += 1
                    if kind == "LIST":
                        how = "delimited" if "delimiter" in query else "recursive"
                        proxy.listed[f"{query.get('prefix', [''])[0]} ({how})"] += 1
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self) -> tuple[Counter[str], Counter[str]]:
        """The counts since the last ``take`` (and reset them)."""
        with self.lock:
            counts, listed = self.counts, self.listed
            self.counts, self.listed = Counter(), Counter()
        return counts, listed

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
