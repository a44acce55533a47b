"""What stops other web pages from using the keyless server on loopback.

Without an API key the server trusts whoever can reach 127.0.0.1, which includes any web page
the user has open: a page can POST a form cross-origin (a CORS "simple request" needs no
preflight), and a page on a domain that re-resolves to 127.0.0.1 (DNS rebinding) can read
every answer. So, when no key is set:

- the `Host` header must name this machine: a loopback name or address, or the host the
  server was told to bind (rebinding pages send their own domain);
- a state-changing request (POST, PUT, PATCH, DELETE) that says where it comes from must come
  from the server's own origin: `Origin`, when present, must equal `http(s)://<Host>`, and
  `Sec-Fetch-Site`, when present, must not be cross-site or same-site.

Clients that are not browsers (curl, httpx, the MCP server) send neither header and pass.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
# Bind addresses that are not names a client would send as Host.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(authority: str) -> str | None:
    """The host part of a `host[:port]` authority, lower case; None when it is malformed."""
    try:
        parts = urlsplit("//" + authority)
        _ = parts.port  # raises on a port that is not a number
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query:
        return None
    return parts.hostname.rstrip(".")


class LoopbackGuard:
    """Plain ASGI (SSE-safe): 403 for a foreign Host, or a cross-origin state change."""

    def __init__(self, app: ASGIApp, bind_host: str | None = None) -> None:
        self.app = app
        extra = (bind_host or "").strip("[]").lower()
        self.extra_hosts = frozenset() if extra in WILDCARD_HOSTS else frozenset({extra})

    def host_allowed(self, authority: str) -> bool:
        name = host_name(authority)
        return name is not None and (is_loopback(name) or name in self.extra_hosts)

    def refusal(self, scope: Scope) -> str | None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        if host is not None and not self.host_allowed(host):
            return (
                f"Host {host[:100]!r} is not this server: without an API key it answers"
                " only to localhost or 127.0.0.1 (this stops DNS rebinding). Open it as"
                " http://127.0.0.1:<port>, or set RAGLOOP_API_KEY."
            )
        return cross_origin_write(scope, headers, "a server without an API key")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = self.refusal(scope) if scope["type"] == "http" else None
        if reason is None:
            await self.app(scope, receive, send)
            return
        for message in forbidden(reason):
            await send(message)


def cross_origin_write(scope: Scope, headers: Headers, refused_by: str) -> str | None:
    """Why a state-changing request is refused as coming from another page (None when it
    is not): `Origin`, when present, must be `http(s)://<Host>`, and `Sec-Fetch-Site`, when
    present, must not be cross-site or same-site. `refused_by` ends the message ("a server
    without an API key", "the page's cookie")."""
    if scope.get("method") not in UNSAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is not None:
        expected = headers.get("host") or _authority(scope)
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != expected.lower():
            return (
                f"Cross-origin request refused: Origin {origin[:100]!r} is not this"
                f" server's own page. Other web pages cannot write through {refused_by}."
            )
    if headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        return f"Cross-site request refused: other web pages cannot write through {refused_by}."
    return None


def forbidden(reason: str) -> list[dict[str, object]]:
    """The two ASGI messages of a 403 in the API's error shape."""
    body = json.dumps({"error": "forbidden", "message": reason}).encode()
    return [
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


def _authority(scope: Scope) -> str:
    server = scope.get("server") or ("", None)
    host, port = server[0], server[1]
    if ":" in host:
        host = f"[{host}]"
    return host if port in (None, 80) else f"{host}:{port}"
