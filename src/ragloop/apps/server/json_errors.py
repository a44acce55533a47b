"""Replacing the body of an error reply that another layer already started, in plain ASGI
(so streamed replies, SSE among them, pass through untouched): the body limiter's plain-text
413 becomes the API's JSON error, and an error under /v1 becomes OpenAI's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# (status, body as sent) -> (status, JSON body to send instead)
Rewrite = Callable[[int, bytes], tuple[int, bytes]]


async def rewrite_errors(app: ASGIApp, scope: Scope, receive: Receive, send: Send,
                         wanted: Callable[[int], bool], rewrite: Rewrite) -> None:
    """Run `app`; a reply whose status is `wanted` is held whole and sent as `rewrite` makes
    it, with its headers kept but for the length and the type (now JSON)."""
    held: dict[str, Any] = {}

    async def relay(message: Message) -> None:
        if message["type"] == "http.response.start" and wanted(message["status"]):
            held["start"], held["body"] = message, b""
            return
        if "start" not in held:
            await send(message)
            return
        held["body"] += message.get("body", b"")
        if message.get("more_body"):
            return
        status, body = rewrite(held["start"]["status"], held["body"])
        headers = [(k, v) for k, v in held["start"].get("headers", [])
                   if k.lower() not in (b"content-length", b"content-type")]
        headers += [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]
        await send({**held["start"], "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    await app(scope, receive, relay)
