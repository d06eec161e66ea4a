"""The inspector's web server: GET only, ids in URLs, nothing served from outside the memory
folder, nothing written.

    server = make_server(MemoryFolder(path), "127.0.0.1", 8765)
    server.serve_forever()
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mimir.inspect import pages
from mimir.inspect.folder import InspectError, MemoryFolder
from mimir_memory.errors import MemoryStoreError

LOG = logging.getLogger(__name__)


class BadRequestError(ValueError):
    """A query the inspector cannot answer (a time that is not a number...)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _time(query: dict[str, list[str]], name: str) -> float | None:
    raw = (query.get(name) or [""])[0].strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError as err:
        raise BadRequestError(f"{name} must be a time in seconds, got {raw!r}") from err
    if not math.isfinite(value):
        raise BadRequestError(f"{name} must be a finite time, got {raw!r}")
    return value


def _text(query: dict[str, list[str]], name: str) -> str:
    return (query.get(name) or [""])[0].strip()[:200]


class InspectorHandler(BaseHTTPRequestHandler):
    """Routes one request; ``server.folder`` is the :class:`MemoryFolder`."""

    server: InspectorServer
    server_version = "mimir-inspect"

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def _refuse(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/html",
                   pages.error_page(405, "the inspector only reads").encode(), head=False,
                   extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

    def _route(self, head: bool) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        parts = [unquote(p) for p in url.path.split("/") if p]
        try:
            self._dispatch(parts, query, head)
        except BadRequestError as err:
            self._html(HTTPStatus.BAD_REQUEST, pages.error_page(400, str(err)), head)
        except (InspectError, MemoryStoreError) as err:
            LOG.warning("inspect: %s", err)
            self._html(HTTPStatus.SERVICE_UNAVAILABLE,
                       pages.error_page(503, f"memory cannot be read now: {err}"), head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away

    def _dispatch(self, parts: list[str], query: dict[str, list[str]], head: bool) -> None:
        folder = self.server.folder
        routes: dict[str, Callable[[], tuple[str, str] | None]] = {
            "": lambda: pages.map_page(folder, folder.graph(_time(query, "t")),
                                       _time(query, "t")),
            "timeline": lambda: pages.timeline_page(
                folder, kind=_text(query, "kind"), verdict=_text(query, "verdict"),
                node_id=_text(query, "node"), fusion=bool(_text(query, "fusion"))),
            "keyframes": lambda: pages.keyframes_page(
                folder, node_id=_text(query, "node"), trigger=_text(query, "trigger"),
                camera=_text(query, "camera"), start=_time(query, "start"),
                end=_time(query, "end")),
            "planner": lambda: pages.planner_page(folder),
            "agenda": lambda: pages.agenda_page(folder.task()),
        }
        head_part = parts[0] if parts else ""
        if len(parts) <= 1 and head_part in routes:
            built = routes[head_part]()
            assert built is not None
            self._page(built, "/" + head_part, live=_time(query, "t") is None, head=head)
            return
        if len(parts) == 2 and head_part == "node":
            at = _time(query, "t")
            graph = folder.graph(at)
            node = folder.node(graph, parts[1])
            if node is None:
                when = "now" if at is None else f"at {at:.1f} s"
                self._html(HTTPStatus.NOT_FOUND,
                           pages.error_page(404, f"memory holds no node {parts[1]!r} {when}"),
                           head)
                return
            self._page(pages.node_page(folder, node, graph, at), "/", live=at is None,
                       head=head)
            return
        if len(parts) == 2 and head_part == "keyframe":
            record = folder.keyframe(parts[1])
            if record is None:
                self._html(HTTPStatus.NOT_FOUND,
                           pages.error_page(404, f"no keyframe {parts[1]!r}"), head)
                return
            graph = folder.graph(at=record.timestamp)  # the nodes as memory held them then
            self._page(pages.keyframe_page(record, graph), "/keyframes", live=False, head=head)
            return
        if len(parts) == 2 and head_part in ("image", "thumb"):
            path = folder.keyframe_file(parts[1], thumbnail=head_part == "thumb")
            if path is None:
                self._html(HTTPStatus.NOT_FOUND,
                           pages.error_page(404, f"no image for keyframe {parts[1]!r}"), head)
                return
            self._send(HTTPStatus.OK, "image/jpeg" if path.suffix.lower() in (".jpg", ".jpeg")
                       else "image/png", path.read_bytes(), head)
            return
        if parts == ["api", "state"]:
            state = {"revision": folder.refresh(), "changed": folder.last_change(),
                     "task_mtime": self.server.task_mtime()}
            self._send(HTTPStatus.OK, "application/json", json.dumps(state).encode(), head)
            return
        self._html(HTTPStatus.NOT_FOUND, pages.error_page(404, "no such page"), head)

    def _page(self, built: tuple[str, str], here: str, *, live: bool, head: bool) -> None:
        title, body = built
        folder = self.server.folder
        text = pages.page(title, body, here=here, folder=folder, revision=folder.refresh(),
                          changed=folder.last_change(), task_mtime=self.server.task_mtime(),
                          live=live)
        self._html(HTTPStatus.OK, text, head)

    def _html(self, status: HTTPStatus, text: str, head: bool) -> None:
        self._send(status, "text/html; charset=utf-8", text.encode(), head)

    def _send(self, status: HTTPStatus, kind: str, data: bytes, head: bool,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy",
                         "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
                         "script-src 'unsafe-inline'; connect-src 'self'; form-action 'self'")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(data)


class InspectorServer(ThreadingHTTPServer):
    """A threading HTTP server that holds the memory folder it shows."""

    daemon_threads = True

    def __init__(self, folder: MemoryFolder, host: str, port: int) -> None:
        self.folder = folder
        super().__init__((host, port), InspectorHandler)

    def task_mtime(self) -> float:
        """When task memory last changed (its database or write-ahead log), for live pages."""
        stamps = [p.stat().st_mtime for p in (self.folder.root / "task.db",
                                              self.folder.root / "task.db-wal") if p.is_file()]
        return max(stamps, default=0.0)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}/"


def make_server(folder: MemoryFolder, host: str = "127.0.0.1", port: int = 8765
                ) -> InspectorServer:
    """A server bound to ``host:port`` (port 0: any free port)."""
    return InspectorServer(folder, host, port)
