"""Fixtures: a loopback HTTP server (Range support) and synthetic DICOM / NIfTI data."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class Server:
    """Routes ``path -> bytes`` (exact path incl. query) served on 127.0.0.1."""

    base: str = ""
    routes: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)
    honour_range: bool = True
    truncate: dict[str, int] = field(default_factory=dict)  # path -> bytes sent, then close
    #: path -> headers sent instead of the usual ones (a hostile Content-Length, say)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    #: path -> Content-Type sent with it (a package index's pages need text/html)
    content_types: dict[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return self.base + path


def _handler(server: Server):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802
            range_header = self.headers.get("Range")
            server.requests.append((self.path, range_header))
            body = server.routes.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            if range_header and server.honour_range:
                start = int(range_header.split("=")[1].split("-")[0])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            if self.path in server.headers:
                for key, value in server.headers[self.path].items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(part)
                self.close_connection = True
                return
            self.send_header("Content-Length", str(len(part)))
            self.send_header("Accept-Ranges", "bytes")
            if self.path in server.content_types:
                self.send_header("Content-Type", server.content_types[self.path])
            self.end_headers()
            cut = server.truncate.pop(self.path, None)
            if cut is not None:
                self.wfile.write(part[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(part)

    return Handler


@pytest.fixture
def http_server() -> Iterator[Server]:
    state = Server()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
