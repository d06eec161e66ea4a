"""An OpenAI-compatible endpoint on 127.0.0.1 that replays scripted answers, for the tests of
the reasoning backends, the interaction analyzer and the analyzer node."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mimir_planner.reasoning.config import VlmConfig


@dataclass
class Step:
    """One scripted server reaction."""

    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False


class RecordedServer:
    """OpenAI-compatible endpoint on 127.0.0.1 replaying scripted steps in order."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, object]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                server.requests.append(json.loads(body))
                server.headers.append(dict(self.headers))
                step = server.steps.pop(0) if server.steps else Step(500, "{}")
                if step.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if step.delay_s:
                    time.sleep(step.delay_s)
                data = step.body.encode()
                try:
                    self.send_response(step.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in step.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def vlm_config(self, **overrides: object) -> VlmConfig:
        base: dict[str, object] = {
            "backend": "openai",
            "base_url": self.url,
            "model": "Qwen2.5-VL-7B-Instruct",
            "api_key_env": "",
            "timeout_s": 2.0,
            "max_attempts": 3,
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.05,
        }
        base.update(overrides)
        return VlmConfig(**base)  # type: ignore[arg-type]


@contextmanager
def serve(steps: list[Step]) -> Iterator[RecordedServer]:
    server = RecordedServer(steps)
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
