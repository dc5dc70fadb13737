"""A loopback stand-in for the Hugging Face Hub: what ``hf_hub_download`` asks of an endpoint.

``HEAD /<repo>/resolve/<revision>/<path>`` answers with the headers huggingface_hub reads
(``X-Repo-Commit``, ``ETag``, ``Content-Length``); ``GET`` serves the file, honouring
``Range: bytes=N-`` with a 206. A file can be cut after some bytes on its first GET (the
connection closed, as a dropped transfer), announced with another size, or answered for
another commit.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from dataclasses import dataclass, field


@dataclass
class HubFile:
    body: bytes
    #: the first GET sends only this many bytes, then closes the connection
    cut_after: int | None = None
    #: the size HEAD announces (default: the body's)
    announced_size: int | None = None


@dataclass
class Hub:
    base: str = ""
    #: (repo, path) -> file
    files: dict[tuple[str, str], HubFile] = field(default_factory=dict)
    #: the commit it answers for (default: the revision asked for)
    commit: str | None = None
    #: (method, request path, Range header)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)

    def add(self, repo: str, path: str, body: bytes, **options) -> None:
        self.files[(repo, path)] = HubFile(body, **options)

    def gets(self, path_end: str) -> list[str | None]:
        """The Range headers of the GETs of files whose request path ends with ``path_end``."""
        return [
            r for method, path, r in self.requests if method == "GET" and path.endswith(path_end)
        ]


def _handler(hub: Hub):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _find(self):
            head, sep, path = self.path.partition("/resolve/")
            revision, _, path = path.partition("/")
            repo = head.lstrip("/")
            return (hub.files.get((repo, path.split("?")[0])) if sep else None), revision

        def _headers(self, found: HubFile, revision: str, length: int) -> None:
            self.send_header("X-Repo-Commit", hub.commit or revision)
            self.send_header("ETag", f'"{hashlib.sha256(found.body).hexdigest()}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(length))

        def do_HEAD(self):  # noqa: N802
            hub.requests.append(("HEAD", self.path, None))
            found, revision = self._find()
            if found is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.send_header("X-Error-Code", "EntryNotFound")
                self.end_headers()
                return
            self.send_response(200)
            self._headers(found, revision, found.announced_size or len(found.body))
            self.end_headers()

        def do_GET(self):  # noqa: N802
            range_header = self.headers.get("Range")
            hub.requests.append(("GET", self.path, range_header))
            found, revision = self._find()
            if found is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(range_header.split("=")[1].split("-")[0]) if range_header else 0
            body = found.body[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header(
                    "Content-Range", f"bytes {start}-{len(found.body) - 1}/{len(found.body)}"
                )
            self._headers(found, revision, len(body))
            self.end_headers()
            if found.cut_after is not None:
                cut, found.cut_after = found.cut_after, None
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.close()
                return
            self.wfile.write(body)

    return Handler


def start_hub() -> tuple[Hub, http.server.ThreadingHTTPServer]:
    hub = Hub()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return hub, server
