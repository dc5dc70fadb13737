"""The session page's local HTTP server (standard library, bound to 127.0.0.1 by default).

Routes (JSON unless said): ``GET /`` the page; ``GET /api/state``; ``GET /api/slice/Z`` slice
Z as little-endian float32 (y, x); ``POST /api/view`` ``{"slice", "window", "ago"}``;
``POST /api/interaction`` ``{"kind", "geometry", "shown_ago", "ago"}``; ``POST /api/undo``;
``POST /api/accept``. ``ago`` fields are seconds between what the person did (or saw) and the
request, measured by the page, so the log's ``t`` is when it happened. A mistake in a request
is answered 400 with ``{"error": one line}``; the page shows it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from intrabench.errors import UserError, one_line_cause
from intrabench.people.sessions.live import LiveSession

MAX_BODY = 1024 * 1024  # a request larger than this is refused (a scribble is a few kB)


def page_html() -> bytes:
    """The session page's HTML, from the package's resources.

    Returns:
        The page's bytes (UTF-8 HTML).
    """
    return resources.files("intrabench.people.sessions").joinpath("page.html").read_bytes()


class SessionServer(ThreadingHTTPServer):
    """Serves one :class:`LiveSession` to the page."""

    daemon_threads = True

    def __init__(self, session: LiveSession, host: str = "127.0.0.1", port: int = 0) -> None:
        self.session = session
        self.page = page_html()
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        """The address the page is served at: ``http://host:port/``."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> threading.Thread:
        """Serve on a daemon thread (tests, the benchmark); :meth:`shutdown` stops it.

        Returns:
            The started thread.
        """
        thread = threading.Thread(target=self.serve_forever, name="session-server", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: SessionServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the session log is the record; no line per request on the terminal

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        session = self.server.session
        path = self.path.split("?", 1)[0]
        try:
            if path in ("/", "/index.html"):
                self._send(200, self.server.page, "text/html; charset=utf-8")
            elif path == "/api/state":
                self._json(200, session.state())
            elif path.startswith("/api/slice/"):
                z = path.rsplit("/", 1)[1]
                if not z.isdigit():
                    raise UserError("slice: give its index, /api/slice/12")
                self._send(200, session.slice_bytes(int(z)), "application/octet-stream")
            else:
                self._json(404, {"error": f"no such page {path[:80]}"})
        except UserError as error:
            self._json(400, {"error": str(error)})
        except Exception as error:  # noqa: BLE001 - the page says it; the log keeps what was
            self._json(500, {"error": one_line_cause(error)})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        session = self.server.session
        path = self.path.split("?", 1)[0]
        try:
            body = self._body()
            if path == "/api/view":
                session.view(body.get("slice"), body.get("window"), _seconds(body.get("ago")))
                self._json(200, {"ok": True})
            elif path == "/api/interaction":
                shown = body.get("shown_ago")
                done = session.interact(
                    body.get("kind"),
                    body.get("geometry"),
                    None if shown is None else _seconds(shown),
                    _seconds(body.get("ago")),
                )
                self._json(200, done)
            elif path == "/api/undo":
                self._json(200, session.undo())
            elif path == "/api/accept":
                self._json(200, session.accept())
            else:
                self._json(404, {"error": f"no such action {path[:80]}"})
        except UserError as error:
            self._json(400, {"error": str(error)})
        except Exception as error:  # noqa: BLE001 - the page says it; the log keeps what was
            self._json(500, {"error": "the model failed: " + one_line_cause(error)})

    def _body(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            raise UserError(f"a request of more than {MAX_BODY} bytes is refused")
        raw = self.rfile.read(int(length))

        def refuse(constant: str) -> Any:
            raise UserError(f"{constant} is not a number the page sends")

        try:
            body = json.loads(raw.decode("utf-8") or "{}", parse_constant=refuse)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise UserError("the request is not JSON") from None
        if not isinstance(body, dict):
            raise UserError("the request is not a JSON object")
        return body

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, allow_nan=False).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError("ago: give seconds as a number")
    return float(value)
