"""Who a request is (issue 43): the principal its API key names, put in the request's scope
for the routes to search, list and fetch as.

Keys are required when `RAGLOOP_API_KEY` is set, when the server listens beyond loopback, or
once any user key is stored (`ragloop keys add`; looked up per request, so a key made while
the server runs takes effect at once). The single `RAGLOOP_API_KEY` is an admin (reads every
document: today's behaviour); a user's key is that user with its groups. With no key at all
on loopback, the server stays open as before (LoopbackGuard) and every request is the admin.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import anyio
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ragloop.apps.server.guard import LoopbackGuard, cross_origin_write, forbidden, is_loopback
from ragloop.core import audit
from ragloop.core.access import ADMIN, Principal

API_KEY_COOKIE = "ragloop_api_key"
#: the scope key the principal is kept under
PRINCIPAL_KEY = "ragloop.principal"
# Open without a key: the static shell of the pages (no data), health, the OpenAPI schema.
PUBLIC_PATHS = {"/", "/dashboard", "/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect",
                "/redoc", "/favicon.ico"}
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class AccessConfig:
    api_key: str | None  # RAGLOOP_API_KEY: the admin's key
    beyond_loopback: bool  # bound to an address others reach: a key is always required


def config_for(api_key: str | None, bind_host: str | None) -> AccessConfig:
    host = (bind_host or "127.0.0.1").strip("[]")
    return AccessConfig(api_key or None, host in WILDCARD_HOSTS or not is_loopback(host))


def keys_required(config: AccessConfig, app: object) -> bool:
    """Whether this request must present a key (reads the stored keys: call off the loop)."""
    if config.api_key or config.beyond_loopback:
        return True
    state = getattr(getattr(app, "state", None), "ragloop", None)
    return state is not None and state.kb.backend.principals.has_keys()


def principal_of(request: Request) -> Principal:
    """The principal the guard found for this request (the admin when none is required)."""
    found = request.scope.get(PRINCIPAL_KEY)
    return found if isinstance(found, Principal) else ADMIN


def _presented(headers: Headers) -> tuple[str | None, bool]:
    """The key sent, and whether it came from the page's cookie."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    if headers.get("x-api-key"):
        return headers["x-api-key"].strip(), False
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == API_KEY_COOKIE:
            return value, True
    return None, False


class AccessGuard:
    """Plain ASGI (SSE-safe): a key where one is required, else the loopback guard."""

    def __init__(self, app: ASGIApp, config: AccessConfig, bind_host: str | None = None) -> None:
        self.app = app
        self.config = config
        self.loopback = LoopbackGuard(app, bind_host)

    def _resolve(self, presented: str, app: object) -> Principal | None:
        if self.config.api_key and hmac.compare_digest(presented.encode(),
                                                       self.config.api_key.encode()):
            return ADMIN
        state = getattr(getattr(app, "state", None), "ragloop", None)
        return None if state is None else state.kb.backend.principals.principal(presented)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        required = await anyio.to_thread.run_sync(keys_required, self.config, scope.get("app"))
        if not required:
            scope[PRINCIPAL_KEY] = ADMIN
            await self.loopback(scope, receive, send)
            return
        if scope["path"] in PUBLIC_PATHS or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        presented, from_cookie = _presented(headers)
        principal = None if presented is None else await anyio.to_thread.run_sync(
            self._resolve, presented, scope.get("app"))
        if principal is not None:
            # A browser sends the cookie (SameSite=Strict) with requests from any page of the
            # same site (another port, a sibling subdomain behind one proxy): a write must
            # come from this server's own page, the keyless guard's rule. A key in a header
            # is set by the client itself, so no other page can send it.
            refused = cross_origin_write(scope, headers, "the page's cookie") \
                if from_cookie else None
            if refused is None:
                scope[PRINCIPAL_KEY] = principal
                await self.app(scope, receive, send)
                return
            for message in forbidden(refused):
                await send(message)
            return
        if presented is not None:  # a wrong or revoked key: never the token itself
            audit.denied("-", "key", "bad_key", path=scope["path"])
        message = ("A valid API key is required: send `Authorization: Bearer <key>` or"
                   " `X-API-Key: <key>`." if presented is None else "The API key is wrong.")
        response = JSONResponse({"error": "unauthorized", "message": message}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
