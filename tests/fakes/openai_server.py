"""A fake OpenAI-compatible chat completions server on 127.0.0.1, for tests of the real `openai` client.

Replies are scripted: a list of `Reply` values served in order, and/or a `responder` function that
answers from the request (so a test can reply by what the prompt contains). A reply can be slow
(`delay_s`, to provoke a client timeout) or an HTTP error (`status=429` with a Retry-After header,
500...). Every request body and its headers are kept for assertions.

    with FakeOpenAI([Reply("```python\\n...\\n```")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test-key")
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `status` other than 200 sends an OpenAI-style error body instead."""

    text: str = ""
    prompt_tokens: int = 100
    completion_tokens: int = 50
    delay_s: float = 0.0
    status: int = 200
    retry_after_s: float | None = None


Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    path: str


class FakeOpenAI:
    """The server; start/stop it with `with`, point the client at `base_url`."""

    def __init__(self, replies: Iterable[Reply] = (), *, responder: Responder | None = None) -> None:
        self.script: deque[Reply] = deque(replies)
        self.responder = responder
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply(status=500, text="the fake server has no scripted reply left")

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.received.append(Received(body, {k.lower(): v for k, v in self.headers.items()}, self.path))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                reply = fake._next(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    headers = {"retry-after": f"{reply.retry_after_s}"} if reply.retry_after_s is not None else {}
                    self._send(reply.status, {"error": {"message": reply.text or "error", "type": "fake_error",
                                                        "code": str(reply.status)}}, headers)
                    return
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(fake.received)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.text}}],
                    "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                              "total_tokens": reply.prompt_tokens + reply.completion_tokens},
                })

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
