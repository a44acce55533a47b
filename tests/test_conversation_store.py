"""Conversations in both run stores: a turn is a run with the conversation's id and its index,
the standalone question is stored when the run finishes, conversations are listed newest
first, a SQLite file from before conversations gets the columns, and `ragloop migrate` copies
them both ways."""

from __future__ import annotations

import sqlite3

from ragloop.core.types import RunStatus
from ragloop.storage.backend import open_backend
from ragloop.storage.migrate import migrate
from ragloop.storage.sqlite.store import DB_FILE


def _turn(runs, question: str, cid: str | None, standalone: str | None = None) -> str:
    run_id = runs.start(question, driver="pipeline", model="offline", max_steps=4,
                        conversation_id=cid)
    runs.finish(run_id, {"status": RunStatus.ANSWERED, "answer": "a", "steps": 2,
                         "latency_s": 0.1, "usage": {}, "standalone": standalone})
    return run_id


def _opened(location: str):
    backend = open_backend(location)
    backend.store  # noqa: B018 - made on first use: the run store lives beside it
    return backend


def test_turns_are_numbered_stored_and_listed(location) -> None:
    backend = _opened(location)
    try:
        runs = backend.runs
        first = _turn(runs, "What is the S200's IP rating?", "c1", "What is the S200's IP rating?")
        single = _turn(runs, "Who is the CFO?", None)
        _turn(runs, "other conversation", "c2")
        second = _turn(runs, "How long does its battery last?", "c1",
                       "How long does the S200 battery last?")
        turns = runs.conversation("c1")
        assert [(t["run_id"], t["turn"]) for t in turns] == [(first, 0), (second, 1)]
        assert turns[1]["standalone"] == "How long does the S200 battery last?"
        assert turns[1]["conversation_id"] == "c1"
        plain = runs.get(single)
        assert (plain["conversation_id"], plain["turn"], plain["standalone"]) == (None, None, None)
        assert runs.conversation("nope") == []
        listed = runs.conversations(10)
        assert [c["conversation_id"] for c in listed] == ["c1", "c2"]  # c1 continued last
        assert listed[0]["title"] == "What is the S200's IP rating?" and listed[0]["turns"] == 2
        assert listed[0]["updated_at"] >= listed[0]["created_at"]
        assert [c["conversation_id"] for c in runs.conversations(1)] == ["c1"]
    finally:
        backend.close()


def test_a_sqlite_file_from_before_conversations_gets_the_columns(tmp_path) -> None:
    folder = tmp_path / "kb"
    backend = _opened(str(folder))
    run_id = _turn(backend.runs, "old question", None)
    backend.close()
    db = sqlite3.connect(folder / DB_FILE)
    for column in ("standalone", "turn", "conversation_id"):
        db.execute("DROP INDEX IF EXISTS runs_conversation")
        db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.commit()
    db.close()
    backend = open_backend(str(folder), create=False)
    try:
        assert backend.runs.get(run_id)["question"] == "old question"
        assert _turn(backend.runs, "new", "c9") and backend.runs.conversation("c9")[0]["turn"] == 0
    finally:
        backend.close()


def test_migrate_copies_conversations_both_ways(small_kb, tmp_path, pg_url) -> None:
    src = small_kb.store.location
    ids = [_turn(small_kb.backend.runs, q, "conv", s) for q, s in
           (("What is the S200?", None), ("and its battery?", "S200 battery?"))]
    want = small_kb.backend.runs.conversation("conv")
    assert migrate(src, pg_url).runs == 2
    back = str(tmp_path / "back")
    assert migrate(pg_url, back).runs == 2
    for location in (pg_url, back):
        b = open_backend(location, create=False)
        try:
            got = b.runs.conversation("conv")
            assert [r["run_id"] for r in got] == ids
            assert got == want
            assert b.runs.conversations()[0]["turns"] == 2
        finally:
            b.close()
