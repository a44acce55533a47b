"""The API's documentation pages (/docs: Swagger UI, /redoc: ReDoc) from local assets.

FastAPI's default pages load Swagger UI and ReDoc from a CDN, so /docs was blank offline. The
same assets ship inside the `fastapi-offline` package (MIT); they are served from here under
/static/api-docs, and the pages are FastAPI's own HTML pointed at them
(https://fastapi.tiangolo.com/how-to/custom-docs-ui-assets/).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/static/api-docs"
# ReDoc's bundle still links its "API docs by Redocly" logo to cdn.redoc.ly; a policy of this
# server only keeps the browser from asking anyone else. Both pages start their UI from an
# inline script and style themselves inline; ReDoc runs its search in a blob: worker.
# (https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy)
THIS_SERVER_ONLY = ("default-src 'self'; script-src 'self' 'unsafe-inline';"
                    " style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
                    " font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'")


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def add_api_docs(app: FastAPI) -> None:
    """/docs, /docs/oauth2-redirect and /redoc on `app` (built with docs_url=None and
    redoc_url=None); mount this before any broader /static mount."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="api-docs-assets")
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local_only(get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{title} - Swagger UI",
            oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png"))

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local_only(get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False))


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = THIS_SERVER_ONLY
    return page
