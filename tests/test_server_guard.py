"""The keyless server on loopback, for real (uvicorn + httpx): other web pages cannot write to
it (cross-origin POST) or read it through DNS rebinding (a foreign Host); odd SSE resume ids
and questions without words get a clear 4xx, never a cut stream or a 500."""

from __future__ import annotations

import httpx
import pytest
from test_server import LiveServer, offline_settings, read_sse, serving

NOTE = b"# Pager policy\n\n## On call\nThe on-call engineer answers pages in 15 minutes.\n"


@pytest.fixture(scope="module")
def live(small_kb_template, tmp_path_factory):
    from test_server import copy_kb

    kb = copy_kb(small_kb_template, tmp_path_factory.mktemp("guard") / "kb")
    try:
        with serving(kb) as server:
            yield server, kb
    finally:
        kb.close()


def upload(c: httpx.Client, name: str, data: bytes = NOTE, **headers: str) -> httpx.Response:
    return c.post("/documents", files=[("files", (name, data, "text/markdown"))], headers=headers)


def test_cross_origin_writes_are_refused(live) -> None:
    server, kb = live
    port = server.url.rsplit(":", 1)[1]
    with server.client() as c:
        runs_before = c.get("/runs", params={"limit": 1000}).json()["runs"]
        # a form on another site: a CORS simple request, so the browser sends it as it is
        r = upload(c, "evil.md", Origin="http://evil.example")
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "forbidden" and "Origin" in r.json()["message"]
        for origin in (
            "null",
            "http://127.0.0.1:1",
            f"http://localhost:{port}",
            f"https://evil.example:{port}",
            f"http://127.0.0.1:{port}.evil.example",
        ):
            assert upload(c, "evil.md", Origin=origin).status_code == 403, origin
        assert upload(c, "evil.md", **{"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert upload(c, "evil.md", **{"Sec-Fetch-Site": "same-site"}).status_code == 403
        for path in ("/runs", "/ask"):
            r = c.post(
                path,
                json={"question": "Is the T9 waterproof?"},
                headers={"Origin": "http://evil.example"},
            )
            assert r.status_code == 403, (path, r.text)
        assert c.get("/runs", params={"limit": 1000}).json()["runs"] == runs_before
        assert "evil.md" not in {d.doc_id for d in kb.documents()}
        assert not (kb.store.folder / "uploads" / "evil.md").exists()
        # reading stays open to any origin's simple GET (the browser hides the answer from it)
        assert c.get("/healthz", headers={"Origin": "http://evil.example"}).status_code == 200

        # the server's own page: same origin, or no Origin at all (curl, httpx)
        same = upload(c, "mine.md", Origin=server.url, **{"Sec-Fetch-Site": "same-origin"})
        assert same.status_code == 200, same.text
        assert upload(c, "mine2.md").status_code == 200
        assert "mine.md" in {d.doc_id for d in kb.documents()}


def test_a_foreign_host_is_refused(live) -> None:
    server, _kb = live
    port = server.url.rsplit(":", 1)[1]
    with server.client() as c:
        for host in (
            "evil.example",
            f"evil.example:{port}",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "user@127.0.0.1",
            "127.0.0.1:bad",
            "",
        ):
            for path in (
                "/documents",
                "/documents/policies/travel.md/sections/4.2",
                "/healthz",
                "/",
            ):
                r = c.get(path, headers={"Host": host})
                assert r.status_code == 403, (host, path, r.text)
                assert "Host" in r.json()["message"]
        r = c.post("/runs", json={"question": "hi"}, headers={"Host": "evil.example"})
        assert r.status_code == 403
        for host in (
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            f"LOCALHOST:{port}",
            f"[::1]:{port}",
            f"127.0.0.2:{port}",
            "localhost.",
        ):
            assert c.get("/documents", headers={"Host": host}).status_code == 200, host


def test_with_an_api_key_the_key_guards_and_any_host_is_served(small_kb) -> None:
    from ragloop.apps.server.app import create_app

    app = create_app(offline_settings(small_kb), kb=small_kb, api_key="k3y")
    with LiveServer(app) as server, server.client() as c:
        key = {"X-API-Key": "k3y"}
        assert c.get("/documents", headers={"Host": "rag.example.com", **key}).status_code == 200
        assert c.get("/documents", headers={"Host": "rag.example.com"}).status_code == 401


def test_with_an_api_key_in_the_cookie_other_pages_of_the_site_cannot_write(small_kb) -> None:
    from ragloop.apps.server.app import API_KEY_COOKIE, create_app

    app = create_app(offline_settings(small_kb), kb=small_kb, api_key="k3y")
    with LiveServer(app) as server, server.client() as c:
        port = server.url.rsplit(":", 1)[1]
        cookie = {"Cookie": f"{API_KEY_COOKIE}=k3y"}
        runs_before = c.get("/runs", params={"limit": 1000}, headers=cookie).json()["runs"]
        # the browser sends the SameSite=Strict cookie with requests from any page of the same
        # site: another port on this host, a sibling subdomain behind the same proxy
        for origin in (f"http://127.0.0.1:{int(port) + 1}", "http://localhost:8080", "null",
                       f"http://127.0.0.1:{port}.evil.example"):
            r = upload(c, "evil.md", Origin=origin, **cookie)
            assert r.status_code == 403, (origin, r.text)
            assert r.json()["error"] == "forbidden" and "cookie" in r.json()["message"]
        assert upload(c, "evil.md", **{"Sec-Fetch-Site": "same-site"}, **cookie).status_code == 403
        for path in ("/runs", "/ask"):
            r = c.post(path, json={"question": "Is the T9 waterproof?"},
                       headers={"Origin": "http://localhost:8080", **cookie})
            assert r.status_code == 403, (path, r.text)
        assert c.get("/runs", params={"limit": 1000}, headers=cookie).json()["runs"] == runs_before
        assert "evil.md" not in {d.doc_id for d in small_kb.documents()}
        assert not (small_kb.store.folder / "uploads" / "evil.md").exists()
        # reads with the cookie stay as they were, whatever the origin
        r = c.get("/documents", headers={"Origin": "http://localhost:8080", **cookie})
        assert r.status_code == 200
        # the server's own page with the cookie, and a client without Origin, may write
        same = upload(c, "mine.md", Origin=server.url, **{"Sec-Fetch-Site": "same-origin"},
                      **cookie)
        assert same.status_code == 200, same.text
        assert upload(c, "mine2.md", **cookie).status_code == 200
        # a key in a header is set by the client itself: unchanged, any origin
        for key in ({"X-API-Key": "k3y"}, {"Authorization": "Bearer k3y"}):
            r = upload(c, "viaheader.md", Origin="http://evil.example",
                       **{"Sec-Fetch-Site": "cross-site"}, **key)
            assert r.status_code == 200, (key, r.text)
        # a wrong cookie is still a 401, not a 403
        assert upload(c, "x.md", Origin=server.url,
                      Cookie=f"{API_KEY_COOKIE}=nope").status_code == 401
        assert {"mine.md", "mine2.md", "viaheader.md"} <= {d.doc_id for d in small_kb.documents()}


def test_the_bind_host_is_accepted_as_a_host(small_kb) -> None:
    from ragloop.apps.server.guard import LoopbackGuard

    guard = LoopbackGuard(app=None, bind_host="ragbox.internal")
    assert guard.host_allowed("ragbox.internal:8000") and guard.host_allowed("127.0.0.1")
    assert not guard.host_allowed("evil.example")
    assert not LoopbackGuard(app=None, bind_host="0.0.0.0").host_allowed("0.0.0.0")


def test_last_event_id_that_is_not_a_seq_we_sent_is_a_400(live) -> None:
    server, _kb = live
    with server.client() as c:
        run_id = c.post("/ask", json={"question": "What battery does the T9 use?"}).json()["run_id"]
        for bad in ("9" * 40, "-" + "9" * 40, "-5", "1_0", "+1", "١".encode(), "2147483648", "1e3"):
            r = c.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": bad})
            assert r.status_code == 400, (bad, r.text)
            assert "Last-Event-ID" in r.json()["message"]
        for after in (10**40, 2**31, -2):
            r = c.get(f"/runs/{run_id}/events", params={"after": after})
            assert r.status_code == 422, (after, r.text)
        # the largest valid seq resumes after everything: just the end
        with c.stream(
            "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": str(2**31 - 1)}
        ) as r:
            assert r.status_code == 200
            events = read_sse(r)
        assert [e for e, _, _ in events] == ["end"]
        with c.stream("GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": "-1"}) as r:
            assert read_sse(r)[0][0] == "step"


def test_a_question_without_words_is_answered_not_a_500(live) -> None:
    server, _kb = live
    with server.client() as c:
        for route in ("single", "agent", "auto"):
            for question in ("?!", "\U0009665b", "😀"):
                r = c.post("/ask", json={"question": question, "route": route})
                assert r.status_code == 200, (route, question, r.text)
                assert r.json()["status"] == "unanswerable"
