"""The HTTP API, for real: uvicorn on a loopback port, httpx, SSE, offline runs on a real KB."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from ragloop.core.config import Settings
from ragloop.core.types import Usage
from ragloop.language.text import ENGLISH_READING

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

MULTI_HOP = "Who approves travel expenses above £2,500, and who is that person?"


class LiveServer:
    """The real app served by uvicorn in a thread on 127.0.0.1, port chosen by the OS."""

    def __init__(self, app) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)


def offline_settings(kb) -> Settings:
    return kb.settings.with_(model="offline", kb=str(kb.store.folder))


def copy_kb(template: Path, folder: Path):
    from ragloop.kb import KnowledgeBase

    shutil.copytree(template, folder)
    return KnowledgeBase.open(folder, Settings().with_(kb=str(folder)))


@contextmanager
def serving(kb, **options):
    from ragloop.apps.server.app import create_app

    app = create_app(offline_settings(kb), kb=kb, **options)
    with LiveServer(app) as live:
        yield live


def read_sse(response: httpx.Response, stop_after: int | None = None):
    """Parse an SSE stream into (event, id, data) until it ends or `stop_after` steps."""
    out = []
    event, ident, data = "message", None, []
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line == "":
            if data:
                out.append((event, ident, json.loads("\n".join(data))))
                if stop_after is not None and sum(e == "step" for e, _, _ in out) >= stop_after:
                    return out
            event, ident, data = "message", None, []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "id":
            ident = value
        elif field == "data":
            data.append(value)
    return out


def stream(client: httpx.Client, run_id: str, last_event_id: int | None = None,
           stop_after: int | None = None):
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    with client.stream("GET", f"/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return read_sse(response, stop_after)


def steps_of(events):
    return [d for e, _, d in events if e == "step"]


class SlowGrader:
    """The real local grader, slowed so that a client can reconnect while the run is going."""
    usage = Usage()  # no model calls

    def __init__(self, kb, delay: float = 0.4) -> None:
        from ragloop.offline.grader import LocalGrader

        self.inner = LocalGrader(kb.embedder, reading=EN_RD)
        self.delay = delay

    def grade(self, question, hits):
        time.sleep(self.delay)
        return self.inner.grade(question, hits)


@pytest.fixture(scope="module")
def module_kb(small_kb_template, tmp_path_factory):
    kb = copy_kb(small_kb_template, tmp_path_factory.mktemp("server") / "kb")
    yield kb
    kb.close()


@pytest.fixture(scope="module")
def live(module_kb):
    with serving(module_kb) as server:
        yield server


@pytest.fixture
def client(live):
    with live.client() as c:
        yield c


# -- runs -----------------------------------------------------------------------------------


def test_background_run_streams_every_event_then_end(client):
    started = client.post("/runs", json={"question": MULTI_HOP, "route": "agent"})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    assert client.get(f"/runs/{run_id}").json()["status"] in ("queued", "running", "answered")

    events = stream(client, run_id)
    steps = steps_of(events)
    assert [s["seq"] for s in steps] == list(range(len(steps)))
    assert [int(i) for e, i, _ in events if e == "step"] == [s["seq"] for s in steps]
    kinds = [s["kind"] for s in steps]
    assert kinds[0] == "route" and "tool_call" in kinds and "grade" in kinds
    assert kinds[-1] == "answer"
    assert all(s["run_id"] == run_id for s in steps)
    searches = [s["data"] for s in steps
                if s["kind"] == "tool_call" and s["data"]["tool"] == "search_knowledge_base"]
    assert searches and all("query" in d and "kept" in d and "chunks" in d for d in searches)
    end = events[-1]
    assert end[0] == "end" and end[2]["status"] in ("answered", "truncated", "unanswerable")

    run = client.get(f"/runs/{run_id}").json()
    assert run["status"] == end[2]["status"]
    assert run["answer"] and isinstance(run["citations"], list) and run["citations"]
    assert {"input_tokens", "output_tokens", "cost_usd"} <= set(run["usage"])
    cited = {(c["doc_id"], c["section"]) for c in run["citations"]}
    assert ("policies/travel.md", "4.2") in cited

    # A client that connects after the end gets the whole run, then the end.
    late = stream(client, run_id)
    assert steps_of(late) == steps and late[-1][0] == "end"


def test_reconnect_with_last_event_id_has_no_gaps_or_duplicates(module_kb, small_kb_template,
                                                                 tmp_path):
    kb = copy_kb(small_kb_template, tmp_path / "kb")
    try:
        with serving(kb, grader=SlowGrader(kb)) as server, server.client() as c:
            run_id = c.post("/runs", json={"question": MULTI_HOP, "route": "agent"}
                            ).json()["run_id"]
            first = stream(c, run_id, stop_after=2)
            assert len(steps_of(first)) == 2
            last_seq = steps_of(first)[-1]["seq"]
            assert c.get(f"/runs/{run_id}").json()["status"] == "running"  # truly mid-run
            rest = stream(c, run_id, last_event_id=last_seq)
            assert rest[-1][0] == "end"
            seqs = [s["seq"] for s in steps_of(first) + steps_of(rest)]
            assert seqs == list(range(len(seqs)))
            full = steps_of(stream(c, run_id))
            assert [s["seq"] for s in full] == seqs
            assert steps_of(first) + steps_of(rest) == full
            # the query-parameter form, for clients that cannot set headers
            with c.stream("GET", f"/runs/{run_id}/events", params={"after": len(seqs) - 2}) as r:
                tail = read_sse(r)
            assert [s["seq"] for s in steps_of(tail)] == [len(seqs) - 1]
    finally:
        kb.close()


def test_ask_answers_synchronously_and_records_the_run(client):
    response = client.post("/ask", json={"question": "Is the T9 sensor waterproof?"})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "answered"
    assert "IP67" in result["answer"]
    assert result["citations"][0]["doc_id"] == "products/sensor.md"
    stored = client.get(f"/runs/{result['run_id']}").json()
    assert stored["answer"] == result["answer"]
    assert any(r["run_id"] == result["run_id"] for r in client.get("/runs").json()["runs"])


def test_runs_list_and_metrics(client):
    client.post("/ask", json={"question": "What battery does the T9 use?"})
    listed = client.get("/runs", params={"limit": 1}).json()["runs"]
    assert len(listed) == 1
    m = client.get("/metrics").json()
    assert m["runs"] >= 1
    for key in ("mean_steps", "truncated_pct", "used_all_steps_pct", "discarded_pct",
                "mean_latency_s", "mean_cost_usd", "p95_latency_s", "warn_truncated",
                "warn_used_all_steps", "by_status"):
        assert key in m
    assert m["mean_steps"] > 0 and m["mean_latency_s"] > 0
    # the runs that reached their ceiling, whatever their status
    done = [r for r in client.get("/runs", params={"limit": 500}).json()["runs"]
            if r["status"] not in ("running", "queued")]
    at_ceiling = [r for r in done if r["max_steps"] and r["steps"] >= r["max_steps"]]
    assert m["used_all_steps_pct"] == 100.0 * len(at_ceiling) / len(done)


# -- documents and search -------------------------------------------------------------------


def test_documents_sections_and_search(client):
    docs = client.get("/documents").json()["documents"]
    assert {d["doc_id"] for d in docs} >= {"policies/travel.md", "products/sensor.md",
                                          "org/leadership.md"}
    section = client.get("/documents/policies/travel.md/sections/4.2").json()
    assert section["doc_id"] == "policies/travel.md" and section["section"] == "4.2"
    assert "Chief Financial Officer" in section["text"]
    doc = client.get("/documents/policies/travel.md").json()
    assert "4.2" in [s["section"] for s in doc["section_list"]]

    missing = client.get("/documents/policies/travel.md/sections/9.9")
    assert missing.status_code == 404 and "4.2" in missing.json()["message"]
    assert client.get("/documents/no/such.md/sections/1").status_code == 404
    assert client.get("/documents/no/such.md").status_code == 404

    hits = client.get("/search", params={"q": "waterproof immersion", "k": 3}).json()["hits"]
    assert hits and hits[0]["doc_id"] == "products/sensor.md" and len(hits) <= 3
    bm25 = client.get("/search", params={"q": "CR123A battery", "mode": "bm25"}).json()
    assert bm25["hits"][0]["section_title"] == "Power"
    assert client.get("/search", params={"q": "x", "mode": "magic"}).status_code == 422
    assert client.get("/search", params={"q": "  "}).status_code == 400
    assert client.get("/search", params={"q": "x", "k": 0}).status_code == 422


# -- bad requests ---------------------------------------------------------------------------


def test_bad_requests_get_clear_json_errors_and_change_nothing(client):
    before = client.get("/runs", params={"limit": 1000}).json()["runs"]
    cases = [
        ({"question": ""}, 422),
        ({"question": "   \n "}, 422),
        ({"question": "x" * 5000}, 422),
        ({"question": "ok?", "max_steps": 1}, 422),
        ({"question": "ok?", "route": "sideways"}, 422),
        ({"question": "ok?", "surprise": True}, 422),
        ({"question": "ok?", "driver": "tools"}, 400),  # no chat model offline
        ({}, 422),
    ]
    for path in ("/runs", "/ask"):
        for body, status in cases:
            r = client.post(path, json=body)
            assert r.status_code == status, (path, body, r.text)
            err = r.json()
            assert err["error"] and err["message"], err
    huge = client.post("/runs", content=json.dumps({"question": "x" * (10 << 20)}),
                       headers={"Content-Type": "application/json"})
    assert huge.status_code == 413 and huge.json()["error"] == "too_large"
    not_json = client.post("/runs", content=b"{nope", headers={"Content-Type":
                                                                "application/json"})
    assert not_json.status_code == 422
    for path in ("/runs/nosuchrun", "/runs/nosuchrun/events"):
        r = client.get(path)
        assert r.status_code == 404 and "nosuchrun" in r.json()["message"]
    assert client.get("/runs/x/events", headers={"Last-Event-ID": "abc"}).status_code in (400,
                                                                                          404)
    assert client.get("/runs", params={"limit": 0}).status_code == 422
    after = client.get("/runs", params={"limit": 1000}).json()["runs"]
    assert after == before


def test_uploads_ingest_and_reject_bad_files(small_kb):
    from ragloop.apps.server.app import create_app

    folder = Path(small_kb.store.folder)
    app = create_app(offline_settings(small_kb), kb=small_kb, upload_limit=4000)
    with LiveServer(app) as server, server.client() as c:
        note = b"# Pager policy\n\n## On call\nThe on-call engineer answers pages in 15 minutes.\n"
        ok = c.post("/documents", files=[("files", ("oncall.md", note, "text/markdown"))])
        assert ok.status_code == 200, ok.text
        assert ok.json()["added"] == 1
        hits = c.get("/search", params={"q": "on-call pages minutes"}).json()["hits"]
        assert hits[0]["doc_id"] == "oncall.md"
        docs_before = c.get("/documents").json()["documents"]

        bad = [
            (("../evil.md", b"# x\n\ntext\n", "text/markdown"), 400),
            (("/etc/evil.md", b"# x\n\ntext\n", "text/markdown"), 400),
            (("sub\\evil.md", b"# x\n\ntext\n", "text/markdown"), 400),
            ((".hidden.md", b"# x\n\ntext\n", "text/markdown"), 400),
            (("tool.exe", b"MZ", "application/octet-stream"), 415),
            (("big.md", b"# big\n\n" + b"word " * 2000, "text/markdown"), 413),
        ]
        for upload, status in bad:
            # a good file alongside: the request is rejected as a whole
            r = c.post("/documents", files=[("files", ("fine.md", b"# Fine\n\nok\n",
                                                       "text/markdown")),
                                            ("files", upload)])
            assert r.status_code == status, (upload[0], r.text)
            assert r.json()["message"]
        assert c.get("/documents").json()["documents"] == docs_before
        assert sorted(p.name for p in (folder / "uploads").iterdir()) == ["oncall.md"]
        assert not (folder.parent / "evil.md").exists()
        assert c.post("/documents").status_code == 422  # no files at all


# -- auth, restarts, schema -----------------------------------------------------------------


def test_api_key_is_required_when_set(small_kb):
    from ragloop.apps.server.app import create_app

    app = create_app(offline_settings(small_kb), kb=small_kb, api_key="s3cret-key")
    with LiveServer(app) as server, server.client() as c:
        health = c.get("/healthz").json()
        assert health["status"] == "ok" and health["auth_required"] is True
        assert "chunks" not in health  # public: nothing about the (possibly hidden) content
        assert c.get("/").status_code == 200  # the page shell holds no data
        r = c.get("/documents")
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
        assert c.get("/documents", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/documents", headers={"X-API-Key": "wrong"}).status_code == 401
        assert c.post("/runs", json={"question": "hi"}).status_code == 401
        assert c.get("/documents", headers={"Authorization": "Bearer s3cret-key"}
                     ).status_code == 200
        assert c.get("/documents", headers={"X-API-Key": "s3cret-key"}).status_code == 200
        cookie = {"Cookie": "ragloop_api_key=s3cret-key"}
        assert c.get("/documents", headers=cookie).status_code == 200
        assert c.get("/runs").status_code == 401  # nothing was started by the refused POST


def test_refuses_to_bind_beyond_loopback_without_a_key(tmp_path):
    from ragloop.apps.server.app import check_bind
    from ragloop.core.errors import ConfigError

    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        with pytest.raises(ConfigError, match="RAGLOOP_API_KEY"):
            check_bind(host, None)
        check_bind(host, "a-key")
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAGLOOP_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "ragloop", "serve", "--host", "0.0.0.0",
                           "--kb", str(tmp_path / "kb")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2
    assert "RAGLOOP_API_KEY" in done.stderr


def test_runs_left_running_are_marked_interrupted_on_start(small_kb):
    from ragloop.storage.sqlite.runs import SqliteRunStore as RunStore

    store = RunStore(small_kb.store.db_path)
    dead = store.start("a question whose server died", driver="pipeline", max_steps=6)
    store.close()
    with serving(small_kb) as server, server.client() as c:
        run = c.get(f"/runs/{dead}").json()
        assert run["status"] == "failed"
        assert run["error"] == "interrupted by server restart"
        events = stream(c, dead)
        assert events == [("end", None, {"run_id": dead, "status": "failed",
                                         "error": "interrupted by server restart",
                                         "steps": 0, "latency_s": None})]


def test_openapi_is_served(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in ("/runs", "/runs/{run_id}", "/runs/{run_id}/events", "/ask", "/documents",
                 "/documents/{doc_id}/sections/{section}", "/search", "/metrics", "/healthz"):
        assert path in paths, path
    assert client.get("/healthz").json()["status"] == "ok"


def test_api_docs_reference_only_local_assets_that_are_served(small_kb_template, tmp_path):
    """No CDN: every script, stylesheet and icon of /docs and /redoc is a path of this server,
    and each is served."""
    import re

    from ragloop.apps.server.app import create_app

    kb = copy_kb(small_kb_template, tmp_path / "kb")
    try:
        with LiveServer(create_app(offline_settings(kb), kb=kb)) as server, \
                server.client() as c:
            for page in ("/docs", "/redoc"):
                html = c.get(page).text
                assets = re.findall(r'(?:src|href)="([^"]+)"', html)
                assert assets, html
                for url in assets:
                    assert url.startswith("/"), (page, url)
                    assert c.get(url).status_code == 200, url
                assert "cdn" not in html.lower()
    finally:
        kb.close()
