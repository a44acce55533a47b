"""A small scriptable JSON-over-HTTP server: the shared base of the provider fakes.

Each request is recorded (path, headers, JSON body). The reply comes from a queue of steps;
when the queue is empty, `default` builds the reply from the request body. Steps:

- a dict: 200 with that JSON body
- `Fail(status, body=None, headers=None)`: an error status (sent with `retry-after-ms: 1` so
  SDK retries are fast, unless headers say otherwise)
- `Delay(seconds, then=None)`: sleep (to exceed a client timeout), then reply `then` or default

A request with `"stream": true` gets its 200 reply as Server-Sent Events, cut by the fake's
`stream` function into the events the real API sends (`(event name or None, data)` pairs; a
data string is sent as it is, e.g. OpenAI's `[DONE]`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Fail:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Delay:
    seconds: float
    then: dict[str, Any] | Fail | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Step = dict[str, Any] | Fail | Delay
# A reply body (and the request body) → the SSE events of the same reply, streamed.
Streamer = Callable[[dict[str, Any], dict[str, Any]], list[tuple[str | None, Any]]]


class FakeJSONServer:
    """Serves POST `path` on 127.0.0.1:<free port> in a daemon thread. Use as a context manager."""

    def __init__(
        self,
        path: str,
        default: Callable[[dict[str, Any]], dict[str, Any]],
        error_body: Callable[[int], dict[str, Any]],
        stream: Streamer | None = None,
    ) -> None:
        self.path = path
        self.stream = stream
        self.default = default
        self.error_body = error_body
        self.requests: list[Recorded] = []
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------
    def enqueue(self, *steps: Step) -> FakeJSONServer:
        with self._lock:
            self._steps.extend(steps)
        return self

    def fail(self, status: int, times: int = 1, **kw: Any) -> FakeJSONServer:
        return self.enqueue(*[Fail(status, **kw) for _ in range(times)])

    def delay(self, seconds: float, times: int = 1) -> FakeJSONServer:
        return self.enqueue(*[Delay(seconds) for _ in range(times)])

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1].body

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeJSONServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeJSONServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        with self._lock:
            self.requests.append(
                Recorded(h.path, {k.lower(): v for k, v in h.headers.items()}, body)
            )
            step = self._steps.popleft() if self._steps else None
        if h.path.split("?")[0].rstrip("/") != self.path:
            self._send(h, 404, {"error": {"type": "not_found", "message": f"no {h.path}"}})
            return
        if isinstance(step, Delay):
            time.sleep(step.seconds)
            step = step.then
        if isinstance(step, Fail):
            headers = {"retry-after-ms": "1", **step.headers}
            self._send(h, step.status, step.body or self.error_body(step.status), headers)
        else:
            reply = step if isinstance(step, dict) else self.default(body)
            if body.get("stream") and self.stream is not None:
                self._send_events(h, self.stream(reply, body))
            else:
                self._send(h, 200, reply)

    @staticmethod
    def _send_events(h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]]) -> None:
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Cache-Control", "no-cache")
            h.send_header("Connection", "close")
            h.end_headers()
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                h.wfile.write((f"event: {name}\n" if name else "").encode()
                              + f"data: {text}\n\n".encode())
                h.wfile.flush()
            h.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
