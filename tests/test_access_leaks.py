"""Every leak channel of issue 43.3, one hostile test each: a shared knowledge base holds
public, group-only (`hr`) and single-user (`alice`) documents, each hidden one carrying a
marker word in its title or text that no other document and no request holds; bob (no
groups) reaches for them through one channel at a time, over HTTP through a real server on a
real SQLite file and a real Postgres database, and no marker (nor a hidden doc id he did not
send himself) comes back. Alice, who may read them, gets them through the same channel: the
control that shows each probe would see a leak.

Channels: search hits and their counts; document lists and counts (/documents,
/knowledge_bases, /healthz, `list_documents`); titles the router, planner and follow-ups
match; the clarifier's options; a decline's closest passages; citations; errors for a hidden
id (the same as for a missing one); the admin endpoints; the audit line; the time a hidden
and a missing id take. A model's tools (list, search, fetch) are driven by a scripted model.
"""

from __future__ import annotations

import json
import logging
import statistics
import time

import pytest
from test_server import LiveServer

from ragloop.agent.engine import Engine
from ragloop.core.errors import NotFoundError
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import ChatResponse, ToolCall
from ragloop.llm.scripted import ScriptedChat
from ragloop.offline.grader import LocalGrader

SENSOR = """# {code} {kind} Vibration Sensor Datasheet

## Power
The {code} runs on a lithium battery. The battery of the {code} lasts {years} years at one
reading every ten minutes.

## Ingress protection
The {code} enclosure is rated {ip} against dust and water.
"""
DOCS = {
    "products/t100-datasheet.md": SENSOR.format(code="T100", kind="Wireless", years=3,
                                                ip="IP65"),
    "products/t200-datasheet.md": SENSOR.format(code="T200", kind="Industrial", years=5,
                                                ip="IP67"),
    # alice's own: a third sensor (a clarifier's option) and her notes (a marker title)
    "products/t900-datasheet.md": "---\naccess: [alice]\n---\n" + SENSOR.format(
        code="T900", kind="Quartzotter", years=9, ip="IP69"),
    "alice.md": "---\naccess: [alice]\n---\n# Quartzotter Review Notes\n\n## Review\nMy"
                " salary review with the manager went well; the bonus agreed is five percent.\n",
    # public, naming a group-only document by its title (what the follow-ups follow)
    "handbook.md": "# Employee Handbook\n\n## Pay\nSalary is paid on the last working day of"
                   " the month, plainwombat. The pay grades of engineers are set out in"
                   " Salary Bands.\n",
    # hr's (the folder's .ragloop-access)
    "hr/bands.md": "# Salary Bands\n\n## Bands\nThe salary bands for engineers run from grade"
                   " one to grade five; velvetheron is the code of the top band.\n",
    "hr/ladder.md": "# Velvetheron Grade Ladder\n\n## Steps\nEach grade on the ladder has"
                    " three steps, reviewed every spring.\n",
}
PUBLIC_IDS = ["handbook.md", "products/t100-datasheet.md", "products/t200-datasheet.md"]
HIDDEN_IDS = ["alice.md", "hr/bands.md", "hr/ladder.md", "products/t900-datasheet.md"]
MARKERS = ("quartzotter", "velvetheron", "t900")
# one question per channel of the offline run: the clarifier (a third sensor), a follow-up
# into a title the public handbook names, a decline's closest passages, a hidden title's words
QUESTIONS = ("How long does the sensor's battery last?",
             "What are the salary bands for engineers?",
             "What bonus was agreed in my review?",
             "How many steps does each grade on the ladder have?")


def _write(root):
    for rel, text in DOCS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "hr" / ".ragloop-access").write_text("hr\n", encoding="utf-8")
    return root


def leaked(body: str, sent: str = "") -> list[str]:
    """The markers and hidden doc ids in `body` (an id bob sent himself is his echo)."""
    low = body.lower()
    found = [m for m in MARKERS if m in low]
    return found + [d for d in HIDDEN_IDS if d in low and d not in sent]


@pytest.fixture
def shared(location, embedder, tmp_path):
    kb = KnowledgeBase.open(location, embedder=embedder)
    kb.settings = kb.settings.with_(model="offline", kb=location)
    kb.ingest([_write(tmp_path / "docs")])
    people = kb.backend.principals
    people.add_user("alice", ["hr"])
    people.add_user("bob")
    people.add_user("carol", ["hr"])  # hr's documents, not alice's own
    people.add_user("root", admin=True)
    keys = {name: {"Authorization": f"Bearer {people.add_key(name)[1]}"}
            for name in ("alice", "bob", "carol", "root")}
    yield kb, keys
    kb.close()


@pytest.fixture
def served(shared):
    from ragloop.apps.server.app import create_app

    kb, keys = shared
    with LiveServer(create_app(kb.settings, kb=kb)) as live, live.client() as c:
        yield kb, keys, c


def test_search_lists_and_counts_show_bob_only_the_public_documents(served):
    _kb, keys, c = served
    bob, alice = keys["bob"], keys["alice"]
    words = "salary bands grade ladder review notes bonus sensor battery"
    for mode in ("hybrid", "bm25", "vector"):
        r = c.get("/search", headers=bob, params={"q": words, "k": 3, "mode": mode})
        assert not leaked(r.text), mode
        assert sorted({h["doc_id"] for h in r.json()["hits"]}) == PUBLIC_IDS  # k hits
        assert len(r.json()["hits"]) == 3
        assert leaked(c.get("/search", headers=alice,
                            params={"q": words, "k": 8, "mode": mode}).text)  # the control
    docs = c.get("/documents", headers=bob)
    assert not leaked(docs.text)
    assert sorted(d["doc_id"] for d in docs.json()["documents"]) == PUBLIC_IDS
    listed = c.get("/knowledge_bases", headers=bob).json()["knowledge_bases"]
    assert [k["documents"] for k in listed] == [len(PUBLIC_IDS)]
    assert c.get("/knowledge_bases", headers=alice).json()["knowledge_bases"][0][
        "documents"] == len(DOCS)
    health = c.get("/healthz")
    assert set(health.json()) == {"status", "active_runs", "auth_required"}  # no count
    # carol (hr) reads hr's documents, not alice's own
    r = c.get("/search", headers=keys["carol"], params={"q": words, "k": 8})
    assert "velvetheron" in r.text.lower() and "quartzotter" not in r.text.lower()


def test_runs_show_bob_no_hidden_title_option_passage_or_citation(served):
    """The router and planner (hidden titles), the follow-ups (a title the public handbook
    names), the clarifier's options, a decline's closest passages and the citations, through
    /ask, /runs and its event stream, and /v1 (streamed)."""
    _kb, keys, c = served
    for question in QUESTIONS:
        for route in ("auto", "agent"):
            r = c.post("/ask", headers=keys["bob"], json={"question": question,
                                                          "route": route})
            assert r.status_code == 200, r.text
            assert not leaked(r.text), (question, route, leaked(r.text), r.text[:600])
    # the controls: alice's runs do reach her documents through the same channels
    ask = c.post("/ask", headers=keys["alice"], json={"question": QUESTIONS[0]}).json()
    assert "T900" in ask["clarification"]["options"]
    bob_ask = c.post("/ask", headers=keys["bob"], json={"question": QUESTIONS[0]}).json()
    assert sorted(bob_ask["clarification"]["options"]) == ["T100", "T200"]
    assert "velvetheron" in json.dumps(c.post("/ask", headers=keys["alice"], json={
        "question": QUESTIONS[1]}).json()).lower()
    assert leaked(json.dumps(c.post("/ask", headers=keys["alice"], json={
        "question": QUESTIONS[2]}).json()))
    started = c.post("/runs", headers=keys["bob"], json={"question": QUESTIONS[1]}).json()
    with c.stream("GET", started["events"], headers=keys["bob"]) as events:
        streamed = "".join(events.iter_text())
    assert '"citations"' in streamed or "citation" in streamed
    assert not leaked(streamed) and not leaked(c.get(started["run"], headers=keys["bob"]).text)
    with c.stream("POST", "/v1/chat/completions", headers=keys["bob"], json={
            "model": "ragloop", "stream": True,
            "messages": [{"role": "user", "content": QUESTIONS[2]}]}) as r:
        chunks = "".join(r.iter_text())
    assert "[DONE]" in chunks and not leaked(chunks)


def test_a_hidden_id_reads_as_a_missing_one_and_is_audited(served, caplog):
    kb, keys, c = served
    bob = keys["bob"]
    caplog.set_level(logging.WARNING, logger="ragloop.audit")

    def same(path: str, method: str = "GET") -> None:
        hidden = c.request(method, path.format("hr/bands.md"), headers=bob)
        missing = c.request(method, path.format("hr/nothere.md"), headers=bob)
        assert hidden.status_code == missing.status_code == 404, path
        assert hidden.text.replace("hr/bands.md", "X") == \
            missing.text.replace("hr/nothere.md", "X"), path
        assert not leaked(hidden.text, path.format("hr/bands.md"))

    same("/documents/{}")
    same("/documents/{}/sections/1")
    same("/documents/{}", "DELETE")
    lines = [r.getMessage() for r in caplog.records if r.name == "ragloop.audit"]
    denied = [line for line in lines if "hr/bands.md" in line]
    # one line per attempt: the hidden id's say so; a missing id's (as costly) say not_found
    assert len(denied) == 3 and len(lines) == 6, lines
    assert all(line.startswith("denied user=bob action=") and "doc_id=hr/bands.md" in line
               and line.endswith("reason=hidden") for line in denied), denied
    assert all(line.endswith("reason=not_found") for line in lines if line not in denied)
    assert not any(leaked(line, "hr/bands.md") or "salary bands" in line.lower()
                   for line in denied)  # never its title or text
    assert "hr/bands.md" in {d.doc_id for d in kb.documents()}  # bob's delete removed nothing
    # a wrong key: a line without the token
    caplog.clear()
    wrong = "rlk_deadbeef_not-a-real-token"
    assert c.get("/documents", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "ragloop.audit"]
    assert lines == ["denied user=- action=key path=/documents reason=bad_key"]


def test_the_admin_view_for_admins_only(served, caplog):
    _kb, keys, c = served
    who = c.get("/access/documents/hr/bands.md", headers=keys["root"])
    assert who.status_code == 200, who.text
    assert who.json()["access"] == ["hr"] and who.json()["users"] == ["alice", "carol", "root"]
    public = c.get("/access/documents/handbook.md", headers=keys["root"]).json()
    assert public["access"] is None and public["users"] == ["alice", "bob", "carol", "root"]
    seen = c.get("/access/users/bob/documents", headers=keys["root"]).json()
    assert sorted(d["doc_id"] for d in seen["documents"]) == PUBLIC_IDS
    assert c.get("/access/documents/nothere.md", headers=keys["root"]).status_code == 404
    caplog.set_level(logging.WARNING, logger="ragloop.audit")
    bodies = {c.get(path, headers=keys["bob"]).text for path in (
        "/access/documents/hr/bands.md", "/access/documents/nothere.md",
        "/access/documents/handbook.md", "/access/users/alice/documents")}
    assert len(bodies) == 1 and "403" in str(c.get("/access/users/alice/documents",
                                                   headers=keys["bob"]).status_code)
    assert sum(r.name == "ragloop.audit" and "reason=not_admin" in r.getMessage()
               for r in caplog.records) == 5


def test_a_models_tools_list_search_and_fetch_only_what_bob_reads(shared):
    """The tools driver with a scripted model: the documents listed (and their count), the
    passages searched and a hidden section fetched, as the model reads them back."""
    kb, _ = shared
    bob = kb.backend.principals.principal_of("bob")
    calls = [ToolCall("a", "list_documents", {}),
             ToolCall("b", "search_knowledge_base", {"query": "salary bands grade ladder"
                                                     " review notes bonus"}),
             ToolCall("c", "fetch_document_section", {"doc_id": "hr/bands.md", "section": "1"}),
             ToolCall("d", "fetch_document_section", {"doc_id": "hr/nothere.md",
                                                      "section": "1"})]
    chat = ScriptedChat([ChatResponse(text="", tool_calls=calls),
                         ChatResponse(text="The knowledge base does not say.")],
                        repeat_last=True)
    grader = LocalGrader(kb.embedder, reading=ENGLISH_READING)
    Engine(kb, kb.settings.with_(citation_check="offline"), chat=chat, principal=bob,
           grader=grader).ask(
        "What are the salary bands?", route="agent", driver="tools")
    for call in chat.calls:  # every call: its prompt, tools, evidence (the answer's too)
        assert not leaked(json.dumps([m.content for m in call.messages], default=str)
                          + (call.system or "") + json.dumps(
                              [t.parameters for t in call.tools or []]), "hr/bands.md")
    loop = [call for call in chat.calls if call.tools]
    tool_msgs = [m.content for m in loop[1].messages if m.role == "tool"]
    assert len(tool_msgs) == 4
    listing = tool_msgs[0]
    assert all(d in listing for d in PUBLIC_IDS) and f"{len(PUBLIC_IDS)}" in listing
    assert tool_msgs[2].replace("hr/bands.md", "X") == tool_msgs[3].replace("hr/nothere.md", "X")


def test_cli_admin_view_and_counts(shared):
    from test_access_principals import ragloop

    kb, _ = shared
    where = kb.settings.kb
    who = ragloop("access", "who", "hr/ladder.md", "--json", "--kb", where)
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["users"] == ["alice", "carol", "root"]
    docs = ragloop("access", "docs", "bob", "--json", "--kb", where)
    assert sorted(d["doc_id"] for d in json.loads(docs.stdout)) == PUBLIC_IDS
    assert not leaked(docs.stdout)
    assert ragloop("access", "who", "nothere.md", "--kb", where).returncode != 0
    listed = ragloop("docs", "--as", "bob", "--kb", where)
    assert f"{len(PUBLIC_IDS)} documents" in listed.stderr + listed.stdout
    assert not leaked(listed.stdout + listed.stderr)


def _median_us(fn, n: int = 300) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def test_a_hidden_id_takes_as_long_as_a_missing_one(shared):
    """Fetching a hidden id does the store's lookup a missing one does (it used to answer at
    once from the readable set, tens of times faster than a missing id's lookup); searching a
    word only a hidden document holds costs about what a word nobody holds does."""
    kb, _ = shared
    seen = kb.for_principal(kb.backend.principals.principal_of("bob"))

    def fetch(doc_id: str):
        def go() -> None:
            with pytest.raises(NotFoundError):
                seen.section(doc_id, "1")
        return go

    fetch("hr/bands.md")()
    pairs = {"fetch": (fetch("hr/bands.md"), fetch("hr/nothere.md")),
             "search": (lambda: seen.search("velvetheron", k=3, mode="bm25"),
                        lambda: seen.search("zorblattic", k=3, mode="bm25"))}
    for name, (hidden, missing) in pairs.items():
        h, m = [], []
        for _ in range(3):  # interleaved rounds: a busy neighbour slows both alike
            h.append(_median_us(hidden, 100))
            m.append(_median_us(missing, 100))
        ratio = statistics.median(h) / statistics.median(m)
        print(f"{name}: hidden {statistics.median(h):.0f} µs, missing"
              f" {statistics.median(m):.0f} µs, ratio {ratio:.2f}")
        assert 1 / 3 < ratio < 3, (name, h, m)


def test_a_query_finds_no_hidden_passage_or_other_users_query_in_the_embedding_cache(served):
    """A search embeds its query through the cache; a cache hit is tens of times faster than
    the model, so a hit on a hidden passage's stored vector (the query is its exact text), or
    on another user's query, would tell bob that the text is there. His queries are cached
    apart: the model runs for them as for any new text."""
    kb, keys, c = served
    hidden = kb.sections("hr/ladder.md")[0].text.strip()  # a chunk's text, cached at ingest
    alice_query = "what grade steps are reviewed in spring"
    assert c.get("/search", headers=keys["alice"], params={"q": alice_query}).status_code == 200
    seen = kb.for_principal(kb.backend.principals.principal_of("bob"))
    before = seen.embedder.misses
    seen.embedder.embed_query([hidden, alice_query])
    assert seen.embedder.misses == before + 2  # neither found in the cache
    seen.embedder.embed_query([alice_query])
    assert seen.embedder.misses == before + 2  # his own repeat is (cached for him)
    timings = {}
    for name, q in (("hidden passage", hidden), ("fresh", "a fresh text " + "w" * 20)):
        t = time.perf_counter()
        c.get("/search", headers=keys["carol"], params={"q": q, "k": 1})
        timings[name] = round((time.perf_counter() - t) * 1000, 1)
    print("first search of each text (ms):", timings)


def test_a_bm25_score_does_not_tell_whether_a_hidden_document_holds_a_word(served, tmp_path):
    """Under bob's filter BM25 counts the readable chunks alone (N, df, avgdl): a word hidden
    documents hold scores as a word nobody else holds (tests/test_access_bm25.py compares
    with a knowledge base of the readable documents only)."""
    kb, keys, c = served
    # a public document holding a hidden marker and a word nobody else holds, once each
    (tmp_path / "probe").mkdir()
    (path := tmp_path / "probe" / "probe.md").write_text(
        "# Probe\n\n## Words\nquartzotter zorblattic\n", encoding="utf-8")
    kb.ingest([path])
    scores = [c.get("/search", headers=keys["bob"], params={
        "q": word, "k": 1, "mode": "bm25"}).json()["hits"][0]["score"]
        for word in ("quartzotter", "zorblattic")]
    assert scores[0] == pytest.approx(scores[1])
