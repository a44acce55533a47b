"""Conversations over real HTTP (uvicorn on loopback, httpx), offline runs on a real knowledge
base, on SQLite (the server's thread pool) and Postgres (its run queue): POST /ask and
POST /runs take a conversation_id ("new" starts one) and return it, the follow-up is searched
standalone (a condense step in the SSE stream), GET /conversations lists them and
GET /conversations/{id} shows the turns; a mistyped id is a 404 that loses nothing."""

from __future__ import annotations

import time

import httpx
import pytest
from test_server import LiveServer, copy_kb, read_sse, serving


def _wait(client: httpx.Client, run_id: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = client.get(f"/runs/{run_id}").json()
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish")


def _converse(c: httpx.Client) -> None:
    first = c.post("/ask", json={"question": "What is the IP rating of the T9 sensor?",
                                 "conversation_id": "new"})
    assert first.status_code == 200, first.text
    cid = first.json()["conversation_id"]
    assert cid and first.json()["standalone"] is None

    started = c.post("/runs", json={"question": "How long does its battery last?",
                                    "conversation_id": cid})
    assert started.status_code == 202, started.text
    assert started.json()["conversation_id"] == cid
    run_id = started.json()["run_id"]
    with c.stream("GET", f"/runs/{run_id}/events") as response:
        steps = [d for e, _, d in read_sse(response) if e == "step"]
    assert steps[0]["kind"] == "condense" and steps[1]["kind"] == "route"
    assert steps[0]["data"]["typed"] == "How long does its battery last?"
    assert "T9" in steps[0]["data"]["standalone"]
    assert steps[0]["data"]["turn_kind"] == "follow_up"
    run = _wait(c, run_id)
    assert run["conversation_id"] == cid and run["turn"] == 1
    assert run["standalone"] == steps[0]["data"]["standalone"]
    assert "5 years" in run["answer"]

    third = c.post("/ask", json={"question": "And who approves expenses above £2,500?",
                                 "conversation_id": cid}).json()
    assert third["conversation_id"] == cid

    shown = c.get(f"/conversations/{cid}")
    assert shown.status_code == 200
    turns = shown.json()["turns"]
    assert [t["turn"] for t in turns] == [0, 1, 2]
    assert [t["question"] for t in turns][:2] == ["What is the IP rating of the T9 sensor?",
                                                  "How long does its battery last?"]
    assert turns[1]["standalone"] == run["standalone"] and turns[1]["run_id"] == run_id
    assert all(t["status"] == "answered" and t["answer"] for t in turns)

    single = c.post("/ask", json={"question": "Who is the Chief Financial Officer?"}).json()
    assert single["conversation_id"] is None  # a question on its own stays on its own
    listed = c.get("/conversations").json()["conversations"]
    assert [x["conversation_id"] for x in listed] == [cid]
    assert listed[0]["turns"] == 3 and listed[0]["title"].startswith("What is the IP rating")

    for bad in ({"question": "and then?", "conversation_id": "nope"},):
        for path in ("/ask", "/runs"):
            r = c.post(path, json=bad)
            assert r.status_code == 404 and "No conversation 'nope'" in r.json()["message"]
    r = c.post("/ask", json={"question": "x", "conversation_id": "bad id; drop"})
    assert r.status_code == 422
    assert c.get("/conversations/nope").status_code == 404
    assert len(c.get(f"/conversations/{cid}").json()["turns"]) == 3  # nothing lost


def test_conversations_over_http_sqlite(small_kb_template, tmp_path) -> None:
    kb = copy_kb(small_kb_template, tmp_path / "kb")
    try:
        with serving(kb) as live, live.client() as c:
            _converse(c)
    finally:
        kb.close()


@pytest.mark.timeout(180)
def test_conversations_over_http_postgres_queue(pg_small_url) -> None:
    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings

    app = create_app(Settings().with_(kb=pg_small_url, model="offline"), local_workers=1)
    with LiveServer(app) as live, live.client() as c:
        _converse(c)


def test_a_follow_up_sent_while_the_first_turn_is_queued_sqlite(small_kb_template,
                                                                tmp_path) -> None:
    """SQLite's in-process queue writes a run when its worker starts it: a follow-up posted
    before then continues the queued conversation (as Postgres's queue row allows), not 404."""
    import threading

    kb = copy_kb(small_kb_template, tmp_path / "kb")
    release = threading.Event()
    try:
        with serving(kb, workers=1) as live, live.client() as c:
            # the one worker busy, so the first turn stays queued
            busy = live.server.config.app.state.ragloop.jobs.executor.submit(release.wait, 60)
            first = c.post("/runs", json={"question": "What is the IP rating of the T9 sensor?",
                                          "conversation_id": "new"})
            assert first.status_code == 202, first.text
            cid = first.json()["conversation_id"]
            assert c.get(f"/runs/{first.json()['run_id']}").json()["status"] == "queued"
            follow = c.post("/runs", json={"question": "How long does its battery last?",
                                           "conversation_id": cid})
            release.set()
            busy.result(60)
            assert follow.status_code == 202, follow.text
            assert follow.json()["conversation_id"] == cid
            _wait(c, first.json()["run_id"])
            run = _wait(c, follow.json()["run_id"])
            assert run["conversation_id"] == cid and run["turn"] == 1
            assert "T9" in run["standalone"] and "5 years" in run["answer"]
            turns = c.get(f"/conversations/{cid}").json()["turns"]
            assert [t["turn"] for t in turns] == [0, 1]
    finally:
        release.set()
        kb.close()
