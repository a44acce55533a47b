"""Runs and conversations belong to their asker (issue 43.4): over real HTTP, on a real
SQLite knowledge base and a real Postgres one (where runs go through the shared queue and its
worker threads), another user cannot list, read, stream, resume or continue them, and every
"not there" reads exactly as an id that does not exist. An admin reads every run."""

from __future__ import annotations

import pytest
from test_access_hostile import _clean, _write
from test_server import LiveServer

from ragloop.agent.engine import Engine
from ragloop.core.access import ADMIN
from ragloop.core.errors import NotFoundError
from ragloop.core.events import RouteEvent
from ragloop.kb import KnowledgeBase
from ragloop.storage.owned import runs_for

ADMIN_KEY = "admin-key-for-the-ownership-tests-0123456789"
QUESTION = "What code is in my salary review notes?"


@pytest.fixture
def served(location, embedder, tmp_path):
    """A shared knowledge base on each backend with alice (hr), bob and carol (an admin)."""
    kb = KnowledgeBase.open(location, embedder=embedder)
    kb.ingest([_write(tmp_path / "docs")])
    people = kb.backend.principals
    people.add_user("alice", ["hr"])
    people.add_user("bob")
    people.add_user("carol", admin=True)
    keys = {name: {"Authorization": f"Bearer {people.add_key(name)[1]}"}
            for name in ("alice", "bob", "carol")}
    keys["admin"] = {"Authorization": f"Bearer {ADMIN_KEY}"}
    yield kb, keys
    kb.close()


def _app(kb):
    from ragloop.apps.server.app import create_app

    settings = kb.settings.with_(model="offline", kb=kb.backend.location)
    return create_app(settings, kb=kb, api_key=ADMIN_KEY)


def _same_404(hidden, missing, hidden_id: str, missing_id: str) -> None:
    """Another's and a nonexistent id answer alike: status and body, the id aside."""
    assert hidden.status_code == missing.status_code == 404, (hidden.text, missing.text)
    assert hidden.text.replace(hidden_id, "X") == missing.text.replace(missing_id, "X")


def _follow(c, path: str, headers: dict[str, str], **extra: str) -> str:
    with c.stream("GET", path, headers={**headers, **extra}) as events:
        assert events.status_code == 200
        return "".join(events.iter_text())


def test_another_user_reaches_none_of_alices_runs(served):
    kb, keys = served
    alice, bob = keys["alice"], keys["bob"]
    with LiveServer(_app(kb)) as live, live.client() as c:
        started = c.post("/runs", headers=alice, json={"question": QUESTION,
                                                       "conversation_id": "new"})
        assert started.status_code == 202, started.text
        run_id, cid = started.json()["run_id"], started.json()["conversation_id"]
        stream = _follow(c, started.json()["events"], alice)
        assert "event: end" in stream and "alice.md" in stream  # her run read her document
        asked = c.post("/ask", headers=alice, json={"question": "And when is salary paid?",
                                                    "conversation_id": cid})
        assert asked.status_code == 200, asked.text
        answer = asked.json()["answer"]
        assert c.get(f"/runs/{run_id}", headers=alice).json()["owner"] == "alice"

        bodies: list[str] = []
        missing_run, missing_cid = "0" * 32, "f" * 32
        for path in ("/runs/{}", "/runs/{}/events"):
            hidden = c.get(path.format(run_id), headers=bob)
            _same_404(hidden, c.get(path.format(missing_run), headers=bob), run_id, missing_run)
            bodies.append(hidden.text)
        # resuming the stream (Last-Event-ID or ?after=) is no way in either
        for extra in ({"headers": {**bob, "Last-Event-ID": "0"}}, {"headers": bob,
                                                                  "params": {"after": 0}}):
            r = c.get(f"/runs/{run_id}/events", **extra)
            assert r.status_code == 404
            bodies.append(r.text)
        hidden = c.get(f"/conversations/{cid}", headers=bob)
        _same_404(hidden, c.get(f"/conversations/{missing_cid}", headers=bob), cid, missing_cid)
        # continuing her conversation, in the background or synchronously
        for route in ("/runs", "/ask"):
            hidden = c.post(route, headers=bob, json={"question": "What did it say?",
                                                      "conversation_id": cid})
            missing = c.post(route, headers=bob, json={"question": "What did it say?",
                                                       "conversation_id": missing_cid})
            _same_404(hidden, missing, cid, missing_cid)
        listed = c.get("/runs", headers=bob).json()["runs"]
        assert listed == []
        assert c.get("/conversations", headers=bob).json()["conversations"] == []
        metrics = c.get("/metrics", headers=bob).json()
        assert metrics["runs"] == 0, metrics  # a user's figures are of its own runs
        # /v1: her answer pasted into a history is plain text, not her run's citations
        r = c.post("/v1/chat/completions", headers=bob, json={"model": "ragloop", "messages": [
            {"role": "user", "content": QUESTION}, {"role": "assistant", "content": answer},
            {"role": "user", "content": "Which document says so?"}]})
        assert r.status_code == 200, r.text
        _clean(r.text)
        for body in bodies:
            _clean(body)
            assert QUESTION not in body  # her question is hers too
        # bob's own run is his: listed to him, not to alice
        mine = c.post("/ask", headers=bob, json={"question": "When is salary paid?"}).json()
        assert mine["run_id"] in {x["run_id"] for x in c.get("/runs", headers=bob).json()["runs"]}
        assert mine["run_id"] not in {x["run_id"]
                                      for x in c.get("/runs", headers=alice).json()["runs"]}
        assert c.get(f"/runs/{mine['run_id']}", headers=alice).status_code == 404

        # alice reads, resumes and continues her own
        assert {x["run_id"] for x in c.get("/runs", headers=alice).json()["runs"]} >= {run_id}
        turns = c.get(f"/conversations/{cid}", headers=alice).json()["turns"]
        assert [t["turn"] for t in turns] == [0, 1]
        assert "event: end" in _follow(c, f"/runs/{run_id}/events", alice, **{"Last-Event-ID": "0"})
        assert [x["conversation_id"] for x in
                c.get("/conversations", headers=alice).json()["conversations"]] == [cid]
        # an admin (the single key, or a user made --admin) reads everyone's, as before
        for admin in (keys["admin"], keys["carol"]):
            assert c.get(f"/runs/{run_id}", headers=admin).status_code == 200
            everyone = {x["run_id"] for x in c.get("/runs", headers=admin).json()["runs"]}
            assert {run_id, mine["run_id"]} <= everyone
            assert c.get(f"/conversations/{cid}", headers=admin).status_code == 200
            assert "event: end" in _follow(c, f"/runs/{run_id}/events", admin)


def test_the_store_filters_by_owner_on_both_backends(served):
    """Each read of each backend's run store takes the owner; a principal's view applies it,
    whatever its caller passes; a run with no owner (from before owners) is admins' only."""
    kb, _ = served
    runs = kb.backend.runs
    people = kb.backend.principals
    alice, bob = people.principal_of("alice"), people.principal_of("bob")
    carol = people.principal_of("carol")
    mine = runs_for(runs, alice).start("alice's question", conversation_id="c-alice")
    runs.add_event(mine, RouteEvent(route="single", reason="alice's route", seq=1))
    runs.finish(mine, {"status": "answered", "answer": "alice's answer"})
    old = runs.start("a question from before owners", conversation_id="c-old")
    runs.finish(old, {"status": "answered", "answer": "an old answer"})
    assert runs.get(mine)["owner"] == "alice" and runs.get(old)["owner"] is None
    for who, sees in ((alice, {mine}), (bob, set()), (carol, {mine, old}),
                      (ADMIN, {mine, old}), (None, {mine, old})):
        view = runs_for(runs, who)
        assert {r["run_id"] for r in view.list(50)} == sees, who
        assert {r for r in (mine, old) if view.get(r) is not None} == sees, who
        assert {c["conversation_id"] for c in view.conversations()} == \
            {{mine: "c-alice", old: "c-old"}[r] for r in sees}, who
        assert bool(view.conversation("c-alice")) == (mine in sees)
        assert (view.answered("alice's answer") is not None) == (mine in sees)
        assert [e.reason for e in view.events(mine)] == (["alice's route"] if mine in sees
                                                          else []), who
        assert view.metrics().runs == len(sees), who
    # a user's view takes no wider owner from its caller
    assert runs_for(runs, bob).list(50, owner="alice") == []
    assert runs_for(runs, bob).get(mine, owner="alice") is None
    # the raw store's owner argument is the same filter
    assert [r["run_id"] for r in runs.list(50, owner="bob")] == []
    assert runs.get(mine, "bob") is None and runs.get(mine, "alice") is not None


def test_python_engine_runs_are_the_principals(served):
    kb, _ = served
    people = kb.backend.principals
    alice, bob = people.principal_of("alice"), people.principal_of("bob")
    talk = Engine(kb, principal=alice).conversation()
    first = talk.ask(QUESTION)
    assert kb.backend.runs.get(first.run_id)["owner"] == "alice"
    with pytest.raises(NotFoundError):
        Engine(kb, principal=bob).conversation(talk.id)
    assert Engine(kb, principal=alice).conversation(talk.id).turns[0].question == QUESTION
    assert Engine(kb).conversation(talk.id)  # no principal: everything, as before
    engine = Engine(kb)
    assert engine.for_principal(bob).runs.list() == []
    assert [r["run_id"] for r in engine.for_principal(alice).runs.list()] == [first.run_id]


def test_a_queued_turn_is_its_askers_alone(served):
    """A conversation whose first turn is still queued (not stored yet) is continued only by
    its asker: the server's pending list is filtered like the store."""
    from ragloop.apps.jobs import JobRunner, Pending

    kb, _ = served
    people = kb.backend.principals
    alice, bob = people.principal_of("alice"), people.principal_of("bob")
    jobs = JobRunner(Engine(kb), kb.backend.runs, workers=1)
    try:
        jobs.pending["r1"] = Pending("r1", "queued question", "c-queued", "alice")
        assert jobs.has_conversation("c-queued", alice) and jobs.has_conversation("c-queued")
        assert not jobs.has_conversation("c-queued", bob)
        assert jobs.get("r1", alice)["owner"] == "alice" and jobs.get("r1", bob) is None
        assert jobs.get("r1", people.principal_of("carol")) is not None
    finally:
        jobs.shutdown()
