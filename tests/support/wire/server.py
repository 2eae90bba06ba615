"""A tiny threaded HTTP server on 127.0.0.1 that answers with scripted wire-format responses.

Each test queues responses (status, headers, body chunks); the server records every request
(path, headers, JSON body) so tests can check what the real SDK sent.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Scripted:
    status: int = 200
    body: bytes | list[bytes] = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait this long before answering (a hanging server)
    drop_after: int | None = None  # send this many body chunks, then cut the connection
    chunk_gap_s: float = 0.0  # wait this long between body chunks (a reply that streams slowly)


@dataclass
class WireServer:
    responses: list[Scripted] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0  # the most requests it was answering at once
    check: Callable[[dict], Scripted | None] | None = (
        None  # a validating server: its answer replaces the queue's
    )

    def __post_init__(self) -> None:
        owner = self
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                owner.requests.append(
                    {
                        "path": self.path, "headers": dict(self.headers),
                        "json": json.loads(raw or b"{}"),
                    }
                )
                refusal = owner.check(owner.requests[-1]["json"]) if owner.check else None
                reply = refusal or (
                    owner.responses.pop(0)
                    if owner.responses
                    else Scripted(500, b'{"error": "no script"}')
                )
                with owner.lock:
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    self._answer(reply)
                finally:
                    with owner.lock:
                        owner.in_flight -= 1

            def _answer(self, reply: Scripted) -> None:
                time.sleep(reply.delay_s)
                chunks = reply.body if isinstance(reply.body, list) else [reply.body]
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(sum(len(c) for c in chunks)))
                self.end_headers()
                for i, chunk in enumerate(chunks):
                    if reply.drop_after is not None and i >= reply.drop_after:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if i and reply.chunk_gap_s:
                        time.sleep(reply.chunk_gap_s)
                    self.wfile.write(chunk)
                    self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def sse(events: list[tuple[str | None, dict]]) -> list[bytes]:
    """Server-sent events: `event:` lines where given, one JSON `data:` line each."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n".encode())
    return out


def openai_stream(
    text: str, tokens_in: int = 20, pieces: int = 2, gap_s: float = 0.0,
    reasoning_tokens: int | None = None, finish: str = "stop",
) -> Scripted:
    """An OpenAI chat-completions stream of `text` in `pieces` chunks, the last with the choice's
    `finish` reason ("length": cut at max_tokens), then a usage chunk; as OpenAI does,
    `reasoning_tokens` count inside completion_tokens too."""
    cuts = [len(text) * i // pieces for i in range(pieces + 1)]
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    events = [
        (
            None,
            {
                **base,
                "choices": [
                    {
                        "index": 0, "delta": {"role": "assistant", "content": text[a:b]},
                        "finish_reason": finish if b == len(text) else None,
                    }
                ],
            },
        )
        for a, b in itertools.pairwise(cuts)
    ]
    tokens_out = max(1, len(text) // 4) + (reasoning_tokens or 0)
    usage: dict = {
        "prompt_tokens": tokens_in, "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    events.append((None, {**base, "choices": [], "usage": usage}))
    return Scripted(
        200, [*sse(events), b"data: [DONE]\n\n"], "text/event-stream", chunk_gap_s=gap_s
    )


def openai_json(text: str, tokens_in: int = 20) -> Scripted:
    """A plain (non-streamed) OpenAI chat completion of `text`."""
    body = {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": tokens_in, "completion_tokens": 5, "total_tokens": tokens_in + 5,
        },
    }
    return Scripted(200, json.dumps(body).encode())


REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def openai_reasoning_check(body: dict) -> Scripted | None:
    """A `WireServer.check` that refuses what OpenAI refuses for its reasoning models (o1, o3,
    o4, gpt-5): `max_tokens`, and a temperature other than the default 1. Same status, same body."""
    if not str(body.get("model", "")).startswith(REASONING_PREFIXES):
        return None
    if "max_tokens" in body:
        return openai_error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter",
        )
    if body.get("temperature", 1) != 1:
        return openai_error(
            f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
            "model. Only the default (1) value is supported.", "temperature", "unsupported_value",
        )
    return None


def openai_error(message: str, param: str, code: str, status: int = 400) -> Scripted:
    """OpenAI's error body for a refused request."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Scripted(status, json.dumps({"error": error}).encode())


def gemini_chunk(text: str, usage: dict | None = None, finish: str = "STOP") -> dict:
    """A Gemini streamed response chunk; the one with usage is the stream's last, with the
    candidate's `finish` reason."""
    out = {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
        "modelVersion": "gemini-test",
    }
    if usage:
        out["usageMetadata"] = usage
        out["candidates"][0]["finishReason"] = finish
    return out
