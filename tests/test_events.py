"""Typed step events: each kind has its own fields, one adapter reads them back, old runs load."""

from __future__ import annotations

import json
import sqlite3

import pydantic
import pytest

from ragloop.core.events import (
    AnswerEvent,
    ErrorEvent,
    GradeEvent,
    PlanEvent,
    RewriteEvent,
    RouteEvent,
    ToolCallEvent,
    event_from,
)

EVENTS = [
    RouteEvent(route="agent", reason="2 parts"),
    PlanEvent(need_search=True, sub_questions=["a?", "b?"], reason="two parts"),
    ToolCallEvent(tool="search_knowledge_base", query="q", chunks=8, kept=3, page=2),
    ToolCallEvent(tool="fetch_document_section", doc_id="a.md", section="4.2", chars=120),
    GradeEvent(query="q", chunks=8, kept=1, enough=False, missing="the date",
               kept_ids=[3], ungraded=None),
    RewriteEvent(query="q2", missing="the date", sub_question=1),
    AnswerEvent(text="X [1].", citations=[{"n": 1, "doc_id": "a.md", "section": "1"}],
                invalid_citations=[], forced=True),
    ErrorEvent(error="HTTP 529"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_every_kind_round_trips_through_its_stored_shape(event) -> None:
    wire = json.loads(json.dumps(event.to_dict()))
    back = event_from(wire["kind"], wire["step"], wire["data"], seq=wire["seq"], ts=wire["ts"])
    assert type(back) is type(event) and back == event


def test_a_misnamed_or_missing_field_is_an_error_where_the_event_is_made() -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolCallEvent(query="q")  # no tool
    with pytest.raises(pydantic.ValidationError):
        event_from("grade", 1, {"chunks": 3})  # a grade names its query, kept and enough
    with pytest.raises(pydantic.ValidationError):
        event_from("no_such_kind", 1, {})


def test_runs_stored_before_typed_events_still_load(small_kb) -> None:
    """Rows written in the old shape (dicts as the drivers wrote them, with keys no longer
    known, like the old "grader reply unreadable" gap) load as typed events."""
    runs = small_kb.backend.runs
    run_id = runs.start("old question", driver="pipeline", model="offline", max_steps=6)
    db = sqlite3.connect(small_kb.store.db_path)
    old = [("route", 0, {"route": "agent", "reason": "long"}),
           ("tool_call", 1, {"tool": "search_knowledge_base", "query": "q", "chunks": 8,
                             "kept": 2, "sub_question": 0}),
           ("grade", 1, {"query": "q", "sub_question": 0, "chunks": 8, "kept": 2,
                         "enough": False, "missing": "grader reply unreadable",
                         "next_query": None, "verdicts": []}),
           ("answer", 2, {"text": "old [1]", "citations": [], "invalid_citations": [],
                          "legacy_field": 1})]
    with db:
        for seq, (kind, step, data) in enumerate(old):
            db.execute("INSERT INTO events(run_id, seq, kind, step, data, ts)"
                       " VALUES (?, ?, ?, ?, ?, ?)", (run_id, seq, kind, step, json.dumps(data),
                                                       1.0 + seq))
    db.close()
    events = runs.events(run_id)
    runs.close()
    assert [type(e) for e in events] == [RouteEvent, ToolCallEvent, GradeEvent, AnswerEvent]
    assert events[2].missing == "grader reply unreadable" and events[2].verdicts == []
    assert events[3].text == "old [1]" and events[1].sub_question == 0
