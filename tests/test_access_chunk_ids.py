"""The chunk ids a restricted user sees (issue 43.3, kb/public_ids.py): a store numbers chunks
across every document, so the gaps between the ids bob may read counted the hidden chunks
written between them. Now his view shows each id through a permutation keyed by a secret kept
with the knowledge base: on a real SQLite file and a real Postgres database, over a real HTTP
server (search hits, a run's events), the ids bob sees do not shift by the hidden chunks,
carry no order, read back to the same chunks, stay the same after a reopen, and an id he
makes up reads as a missing one. An admin, and every path without a principal (the eval),
sees the store's own ids, as before."""

from __future__ import annotations

import json
import secrets

import pytest
from test_server import LiveServer

from ragloop.core.access import Principal
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import _ID_STRIDE, KnowledgeBases
from ragloop.kb.public_ids import BITS, KEY_META

DOC = "# {name} Sensor Notes\n\n## Battery\nThe {name} sensor battery lasts {n} years.\n\n" \
      "## Enclosure\nThe {name} sensor enclosure is rated IP6{n}.\n"
BEFORE = ["a1.md", "a2.md", "a3.md"]  # readable, written before the hidden ones
HIDDEN = ["h1.md", "h2.md", "h3.md"]  # hr's only
AFTER = ["b1.md", "b2.md", "b3.md"]  # readable, written after them
QUERY = "sensor battery enclosure"
BOB = Principal(user="bob")


def _file(root, name: str, n: int):
    front = "---\naccess: [hr]\n---\n" if name in HIDDEN else ""
    path = root / name
    path.write_text(front + DOC.format(name=name[:2].upper(), n=n), encoding="utf-8")
    return path


def _build(location: str, root, embedder, key: str, hidden: bool) -> KnowledgeBase:
    """A KB of BEFORE, then (if `hidden`) HIDDEN, then AFTER, each written by its own ingest
    so the store numbers them in that order; `key`: its chunk id secret (the same for two
    KBs, so that what differs between them is the hidden chunks alone)."""
    root.mkdir()
    kb = KnowledgeBase.open(location, embedder=embedder)
    kb.store.set_meta(KEY_META, key)
    for group in (BEFORE, HIDDEN if hidden else [], AFTER):
        if group:
            kb.ingest([_file(root, name, i) for i, name in enumerate(group, 1)])
    return kb


@pytest.fixture(params=["sqlite", "postgres"])
def two_locations(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "with"), str(tmp_path / "without")
        return
    server = request.getfixturevalue("pg_server")
    names = [server.create_database(), server.create_database()]
    yield tuple(server.url(n) for n in names)
    for n in names:
        server.drop_database(n)


@pytest.fixture
def pair(two_locations, tmp_path, embedder):
    """The same readable documents in two KBs with one key: `with_hidden` has hr's three
    documents written between them, `without` does not."""
    key = secrets.token_hex(32)
    with_hidden = _build(two_locations[0], tmp_path / "d1", embedder, key, hidden=True)
    without = _build(two_locations[1], tmp_path / "d2", embedder, key, hidden=False)
    yield with_hidden, without
    with_hidden.close()
    without.close()


def _seen(kb: KnowledgeBase, principal: Principal | None = BOB) -> dict[tuple[str, str], int]:
    """{(doc_id, section): chunk id} of every chunk `principal` finds (one chunk a section)."""
    hits = kb.for_principal(principal).search(QUERY, k=30, mode="vector")
    found = {(h.doc_id, h.section): h.chunk_id for h in hits}
    assert len(found) == len(hits)
    return found


def _stored_order(kb: KnowledgeBase) -> list[tuple[str, str]]:
    """The readable chunks in the order the store numbered them (the admin's ids)."""
    everything = _seen(kb, None)
    return [c for c, _ in sorted(everything.items(), key=lambda item: item[1])
            if c[0] not in HIDDEN]


def test_the_chunk_ids_bob_sees_do_not_count_hidden_chunks(pair):
    with_hidden, without = pair
    hidden_chunks = sum(d.chunks for d in with_hidden.documents() if d.doc_id in HIDDEN)
    assert hidden_chunks == 6
    mine, theirs = _seen(with_hidden), _seen(without)
    assert set(mine) == set(theirs) and len(mine) == 12  # the same readable chunks
    # the store's ids of the chunks written after hr's are shifted by the hidden chunks ...
    stored_with, stored_without = _seen(with_hidden, None), _seen(without, None)
    after = [c for c in mine if c[0] in AFTER]
    assert {stored_with[c] - stored_without[c] for c in after} == {hidden_chunks}
    # ... bob's are not: nothing of his ids moves by the hidden count, and the ids written
    # before hr's (the same store ids, the same key) stay the same
    assert all(mine[c] - theirs[c] != hidden_chunks for c in after)
    assert all(mine[c] == theirs[c] for c in mine if c[0] in BEFORE)
    # and his ids have no order: sorted, they are not the order the chunks were written in,
    # nor a run from the first id the store gave (all of them spread over 1 .. 2**40)
    order = _stored_order(with_hidden)
    assert sorted(mine, key=mine.get) != order
    assert all(0 < i < 1 << BITS for i in mine.values())
    assert max(mine.values()) - min(mine.values()) > 1000 * with_hidden.store.chunk_count()


def test_a_shown_id_reads_back_and_a_made_up_one_is_not_found(pair):
    kb, _ = pair
    view = kb.for_principal(BOB).store
    mine = _seen(kb)
    ids = list(mine.values())
    read = view.chunks(ids)
    assert sorted(read) == sorted(ids)
    assert all((h.doc_id, h.section) == c and h.chunk_id == mine[c]
               for c, h in ((c, read[i]) for c, i in mine.items()))
    assert view.chunk_docs(ids) == {i: c[0] for c, i in mine.items()}
    # made up, out of range, not a number, a hidden chunk's store id and its shown id: all
    # read as an id no chunk has (nothing, no error)
    everything = _seen(kb, None)
    hidden_stored = [i for c, i in everything.items() if c[0] in HIDDEN]
    shown_hidden = [view.ids.public(i) for i in hidden_stored]
    missing = [123456789, 0, -1, -7, 1 << BITS, (1 << BITS) + 5, 2**62, "12", True]
    for asked in (missing, hidden_stored, shown_hidden):
        assert view.chunks(asked) == {} and view.chunk_docs(asked) == {}, asked
    # a read of a shown id and of a missing one together: only the shown one comes back
    assert list(view.chunks([ids[0], 123456789, *shown_hidden])) == [ids[0]]


def test_the_ids_stay_the_same_after_a_reopen_and_the_key_is_claimed_once(pair):
    kb, _ = pair
    before = _seen(kb)
    again = KnowledgeBase.open(kb.store.location, embedder=kb._inner)
    try:
        assert _seen(again) == before
        # a value is claimed once: a second writer keeps the first one's (how a KB without
        # a key gets one when two processes give their first restricted answer at once)
        first = again.store.claim_meta("probe_key", "one")
        assert (first, kb.store.claim_meta("probe_key", "two")) == ("one", "one")
    finally:
        again.close()


def test_an_admin_and_no_principal_see_the_stores_ids(pair):
    kb, _ = pair
    admin = Principal(user="root", admin=True)
    assert kb.for_principal(admin) is kb and kb.for_principal(None) is kb
    stored = {(h.doc_id, h.section): h.chunk_id for h in kb.search(QUERY, k=30, mode="vector")}
    assert stored == _seen(kb, admin)
    assert sorted(stored.values()) == list(range(1, len(stored) + 1))  # the store's numbering
    # a user who may read every document still sees shown ids: that they are the store's
    # would tell him whether anything is hidden from him
    hr = Principal(user="hana", groups=frozenset({"hr"}))
    shown = _seen(kb, hr)
    assert set(shown) == set(stored) and shown != stored
    assert {kb.for_principal(hr).store.ids.internal(i) for i in shown.values()} == \
        set(stored.values())


def test_several_knowledge_bases_keep_each_ones_ids_apart(pair):
    with_hidden, without = pair
    both = KnowledgeBases({"one": with_hidden, "two": without}, {})
    view = both.for_principal(BOB)
    hits = view.search(QUERY, k=30, mode="vector", knowledge_base=["one", "two"])
    assert {h.kb for h in hits} == {"one", "two"}
    read = view.store.chunks([h.chunk_id for h in hits])
    assert {i: (h.doc_id, h.section) for i, h in read.items()} == \
        {h.chunk_id: (h.doc_id, h.section) for h in hits}
    for h in hits:
        own = _seen(with_hidden if h.kb == "one" else without)
        index = 0 if h.kb == "one" else 1
        assert h.chunk_id == own[(h.doc_id, h.section)] + index * _ID_STRIDE
    assert max(h.chunk_id for h in hits) < 2**53  # a JavaScript number holds it exactly


def test_over_http_bobs_search_hits_and_run_events_show_his_ids(pair):
    """The server's /search and a run's event stream (its grade verdicts and kept ids) show
    bob the ids of his view; the admin's key sees the store's."""
    from ragloop.apps.server.app import create_app

    kb, _ = pair
    kb.settings = kb.settings.with_(model="offline", kb=kb.store.location)
    people = kb.backend.principals
    people.add_user("bob")
    people.add_user("root", admin=True)
    keys = {n: {"Authorization": f"Bearer {people.add_key(n)[1]}"} for n in ("bob", "root")}
    mine, stored = _seen(kb), _seen(kb, None)
    with LiveServer(create_app(kb.settings, kb=kb)) as live, live.client() as c:
        for who, want in (("bob", mine), ("root", stored)):
            hits = c.get("/search", headers=keys[who], params={
                "q": QUERY, "k": 30, "mode": "vector"}).json()["hits"]
            assert {(h["doc_id"], h["section"]): h["chunk_id"] for h in hits} == want, who
        started = c.post("/runs", headers=keys["bob"], json={
            "question": "How long does the A1 sensor battery last?"}).json()
        with c.stream("GET", started["events"], headers=keys["bob"]) as events:
            lines = [json.loads(line[5:]) for line in events.iter_lines()
                     if line.startswith("data:") and line[5:].strip().startswith("{")]
    grades = [e["data"] for e in lines if e.get("kind") == "grade"]
    assert grades
    shown = {v["chunk_id"] for g in grades for v in g.get("verdicts") or []}
    shown |= {i for g in grades for i in g.get("kept_ids") or []}
    assert shown and shown <= set(mine.values()), (shown, mine)
    assert not shown & set(stored.values())
