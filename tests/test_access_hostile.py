"""A hostile reader (issue 43.3/43.4): user B asks, searches, lists and fetches by id over
HTTP, through a real server on a real SQLite knowledge base, and no word of a document B may
not read comes back in any response body; Python's `Engine(kb, principal=...)` the same.

Each private document carries a marker word that is in no other document and in no request,
so any leak of its text (a hit, a title, a passage in an answer, an error) shows."""

from __future__ import annotations

import json

import pytest
from test_server import LiveServer, offline_settings

from ragloop.agent.engine import Engine
from ragloop.core.errors import NotFoundError
from ragloop.kb import KnowledgeBase

ALICE_ONLY = "quartzotter"
HR_ONLY = "velvetheron"
PUBLIC = "plainwombat"
SECRETS = (ALICE_ONLY, HR_ONLY)


def _write(root):
    (root / "hr").mkdir(parents=True)
    (root / "hr" / ".ragloop-access").write_text("hr\n", encoding="utf-8")
    (root / "hr" / "bands.md").write_text(
        f"# Salary bands\n\n## Bands\nThe salary bands for engineers are set each spring."
        f" Code {HR_ONLY}.\n", encoding="utf-8")
    (root / "alice.md").write_text(
        f"---\naccess: [alice]\n---\n# Salary review notes\n\n## Review\nMy salary review"
        f" with the manager went well. Code {ALICE_ONLY}.\n", encoding="utf-8")
    for i in range(3):
        (root / f"public{i}.md").write_text(
            f"# Handbook part {i}\n\n## Pay\nSalary is paid on the last working day of the"
            f" month. Code {PUBLIC}.\n", encoding="utf-8")
    return root


def open_shared(tmp_path, embedder) -> tuple[KnowledgeBase, dict[str, str]]:
    """The suite's knowledge base (`_write`'s documents), with alice (hr) and bob, and a key
    for each: the other access suites start from it too."""
    kb = KnowledgeBase.open(tmp_path / "kb", embedder=embedder)
    kb.ingest([_write(tmp_path / "docs")])
    people = kb.backend.principals
    people.add_user("alice", ["hr"])
    people.add_user("bob")
    return kb, {name: people.add_key(name)[1] for name in ("alice", "bob")}


@pytest.fixture
def shared_kb(tmp_path, embedder):
    kb, keys = open_shared(tmp_path, embedder)
    yield kb, keys
    kb.close()


def _clean(body: str) -> None:
    for marker in SECRETS:
        assert marker not in body.lower(), f"{marker} leaked: {body[:400]}"


def test_bob_reaches_nothing_of_alices_or_hrs_documents_over_http(shared_kb):
    from ragloop.apps.server.app import create_app

    kb, keys = shared_kb
    app = create_app(offline_settings(kb), kb=kb)
    with LiveServer(app) as live, live.client() as c:
        bob = {"Authorization": f"Bearer {keys['bob']}"}
        alice = {"Authorization": f"Bearer {keys['alice']}"}
        bodies: list[str] = []

        def get(path: str, **kw) -> object:
            r = c.get(path, headers=bob, **kw)
            bodies.append(r.text)
            return r

        # searches, every mode: k hits of what bob may read come back (filtered inside)
        for mode in ("hybrid", "bm25", "vector"):
            r = get("/search", params={"q": "salary review bands code", "k": 3, "mode": mode})
            hits = r.json()["hits"]
            assert len(hits) == 3 and all(h["doc_id"].startswith("public") for h in hits)
        docs = get("/documents").json()["documents"]
        assert sorted(d["doc_id"] for d in docs) == ["public0.md", "public1.md", "public2.md"]
        # fetching by id: "not found", the same as for an id that does not exist
        hidden = get("/documents/alice.md")
        missing = get("/documents/nothere.md")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["message"].replace("alice.md", "X") == \
            missing.json()["message"].replace("nothere.md", "X")
        for path in ("/documents/alice.md/sections/1", "/documents/hr/bands.md/sections/1",
                     "/documents/hr/bands.md"):
            assert get(path).status_code == 404
        r = c.delete("/documents/alice.md", headers=bob)
        bodies.append(r.text)
        assert r.status_code == 404
        # asking: synchronously, in the background (its run and events), and through /v1
        for question in ("What did my salary review with the manager say?",
                         "What are the salary bands for engineers?"):
            r = c.post("/ask", json={"question": question, "route": "agent"}, headers=bob)
            bodies.append(r.text)
            assert r.status_code == 200
            started = c.post("/runs", json={"question": question}, headers=bob).json()
            with c.stream("GET", started["events"], headers=bob) as events:
                bodies.append("".join(events.iter_text()))
            bodies.append(get(started["run"]).text)
            r = c.post("/v1/chat/completions", headers=bob, json={
                "model": "ragloop", "messages": [{"role": "user", "content": question}]})
            bodies.append(r.text)
            assert r.status_code == 200
        for body in bodies:
            _clean(body)
        assert any(PUBLIC in b for b in bodies)  # bob does read the public documents
        # the control: alice reads both (her own, and hr's as a member of hr)
        found = c.get("/search", headers=alice,
                      params={"q": "salary review bands code", "k": 5}).text
        assert ALICE_ONLY in found and HR_ONLY in found
        assert c.get("/documents/alice.md", headers=alice).status_code == 200
        assert kb.documents()[0].doc_id  # bob's delete removed nothing
        assert "alice.md" in {d.doc_id for d in kb.documents()}


def test_python_engine_with_a_principal(shared_kb):
    kb, _ = shared_kb
    bob = kb.backend.principals.principal_of("bob")
    seen = kb.for_principal(bob)
    assert {d.doc_id for d in seen.documents()} == {"public0.md", "public1.md", "public2.md"}
    assert seen.store.chunk_count() == 3
    # one model and passage cache for every principal's view (its queries cached apart)
    assert seen.embedder.inner is kb.embedder.inner and seen.embedder.cache is kb.store
    assert kb.for_principal(bob) is seen  # kept: what is made of its content, made once
    with pytest.raises(NotFoundError, match=r"No document .alice\.md."):
        seen.section("alice.md", "1")
    hits = seen.search("salary review code", k=3)
    assert len(hits) == 3 and not any(h.doc_id in ("alice.md", "hr/bands.md") for h in hits)
    result = Engine(kb, offline_settings(kb), principal=bob).ask(
        "What did my salary review with the manager say?", route="agent")
    _clean(json.dumps(result.to_dict(), default=str))
    # no principal (or an admin) reads everything, as before
    assert len(kb.documents()) == 5


def test_a_principal_sees_the_same_on_both_stores(location, embedder, tmp_path):
    """The view filters inside both backends' indexes: k readable hits, hidden ids missing."""
    with KnowledgeBase.open(location, embedder=embedder) as kb:
        kb.ingest([_write(tmp_path / "docs")])
        kb.backend.principals.add_user("bob")
        seen = kb.for_principal(kb.backend.principals.principal_of("bob"))
        for mode in ("hybrid", "bm25", "vector"):
            hits = seen.search("salary review bands code", k=3, mode=mode)
            assert len(hits) == 3 and all(h.doc_id.startswith("public") for h in hits), mode
        assert len(seen.documents()) == 3 and seen.sections("hr/bands.md") == []
        with pytest.raises(NotFoundError):
            seen.section("hr/bands.md", "1")
        alice = kb.for_principal(kb.backend.principals.principal_of(
            kb.backend.principals.add_user("alice", ["hr"])))
        assert {h.doc_id for h in alice.search("salary bands engineers", k=5)} >= {
            "alice.md", "hr/bands.md"}


def test_cli_as_user(shared_kb):
    from test_access_principals import ragloop

    kb, _ = shared_kb
    folder = str(kb.store.folder)
    for args in (["search", "salary review bands code", "-k", "3"], ["docs"]):
        as_bob = ragloop(*args, "--as", "bob", "--json", "--kb", folder)
        assert as_bob.returncode == 0, as_bob.stderr
        _clean(as_bob.stdout)
        assert PUBLIC in as_bob.stdout or "public0.md" in as_bob.stdout
        admin = ragloop(*args, "-k", "5", "--json", "--kb", folder) if args[0] == "search" \
            else ragloop(*args, "--json", "--kb", folder)
        assert "alice.md" in admin.stdout
    assert ragloop("docs", "--as", "nobody", "--kb", folder).returncode == 2


def test_bob_cannot_read_alices_runs(shared_kb):
    from ragloop.apps.server.app import create_app

    kb, keys = shared_kb
    app = create_app(offline_settings(kb), kb=kb)
    with LiveServer(app) as live, live.client() as c:
        alice = {"Authorization": f"Bearer {keys['alice']}"}
        bob = {"Authorization": f"Bearer {keys['bob']}"}
        ran = c.post("/ask", headers=alice, json={"question": "What code is in my salary"
                                                  " review notes?"}).json()
        assert "alice.md" in json.dumps(ran)  # alice's own run read her document
        assert "my salary review notes" not in c.get("/runs", headers=bob).text
        assert c.get(f"/runs/{ran['run_id']}", headers=bob).status_code == 404


def test_an_upload_cannot_probe_or_replace_a_hidden_document(shared_kb):
    """A conflict on a document bob may not read says what any conflict says (no source), and
    no upload of his replaces it, not with overwrite=true, not one an upload created."""
    from ragloop.apps.server.app import create_app

    kb, keys = shared_kb
    app = create_app(offline_settings(kb), kb=kb)
    with LiveServer(app) as live, live.client() as c:
        alice = {"Authorization": f"Bearer {keys['alice']}"}
        bob = {"Authorization": f"Bearer {keys['bob']}"}
        mine = b"---\naccess: [alice]\n---\n# Mine\n\nUploaded by alice, code quartzotter.\n"
        r = c.post("/documents", headers=alice, files=[("files", ("mine.md", mine))])
        assert r.status_code == 200, r.text
        reasons = {}
        for name in ("alice.md", "mine.md", "public0.md"):
            for overwrite in ("false", "true"):
                if name == "public0.md" and overwrite == "true":
                    continue  # bob may read it: overwrite replaces it, as before
                r = c.post("/documents", headers=bob, params={"overwrite": overwrite},
                           files=[("files", (name, b"# Bob\n\nBob was here.\n"))])
                _clean(r.text)
                assert r.status_code == 409, r.text
                assert "docs" not in r.text and "uploads" not in r.text  # no source shown
                reasons[(name, overwrite)] = r.json()["conflicts"][0]["reason"]
        assert len(set(reasons.values())) == 1, reasons  # hidden reads as any other conflict
        texts = {d.doc_id: d for d in kb.documents()}
        assert "mine.md" in texts and "alice.md" in texts
        assert ALICE_ONLY in c.get("/documents/mine.md/sections/0", headers=alice).text


def test_run_and_conversation_ids_are_unguessable(shared_kb):
    """At least 96 random bits, from `secrets`: holding an id must not be guessable."""
    from ragloop.agent.conversations import new_conversation_id
    from ragloop.apps.server.app import create_app

    kb, keys = shared_kb
    app = create_app(offline_settings(kb), kb=kb)
    with LiveServer(app) as live, live.client() as c:
        alice = {"Authorization": f"Bearer {keys['alice']}"}
        ran = c.post("/runs", headers=alice, json={"question": "When is salary paid?"}).json()
        ids = [ran["run_id"], new_conversation_id(), new_conversation_id()]
    assert all(len(i) * 4 >= 96 and int(i, 16) >= 0 for i in ids), ids
    assert len(set(ids)) == 3
