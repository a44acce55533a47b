"""A tool call is shown from one method (`ToolCallEvent.shown`): the log line (which the CLI
prints), /v1 reasoning and the page's step line (made on the server, sent in the SSE payload,
put in by the real app.js in a real Chromium) all read it. Existing events keep their exact
renderings; a field added to the event shows in all of them with nothing else changed; the
four search builders are one (`search_event`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_server import copy_kb, read_sse, serving

from ragloop.agent.run import log_line
from ragloop.agent.tools import FETCH, LIST, SEARCH, search_event
from ragloop.apps.cli import print_event
from ragloop.apps.server.app import _event_payload
from ragloop.apps.server.openai_compat import step_line
from ragloop.apps.server.page_steps import tool_pieces
from ragloop.core.events import ToolCallEvent, event_from
from ragloop.core.types import Hit

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
LI = ('<li class="step step-tool_call" data-kind="tool_call" data-seq="0" data-step="{step}"'
      '{tool}><span class="stepno">step {step}</span><span class="tag">{name}</span>{rest}</li>')


def li(step: int, name: str, rest: str, tool: str = "") -> str:
    return LI.format(step=step, name=name, rest=rest,
                     tool=f' data-tool="{tool}"' if tool else "")


def button(doc: str, section: str) -> str:
    return (f'<button type="button" class="section-link" data-doc="{doc}" data-section='
            f'"{section}" data-kb="undefined" title="{doc} §{section}">{doc} §{section}</button>')


# (event, log line, /v1 reasoning line, the page's <li>): what main rendered before the
# renderings read `shown`, byte for byte
GOLDEN = [
    (ToolCallEvent(step=1, tool=SEARCH, query="travel approval", chunks=8, kept=3,
                   reason="single-shot's search"),
     'step=1 tool=search_knowledge_base query="travel approval" chunks=8 kept=3'
     ' reason="single-shot\'s search"',
     'Searched "travel approval": kept 3 of 8 passages',
     li(1, SEARCH, ' <q>travel approval</q> <span class="counts">kept 3/8 chunks</span>',
        "search")),
    (ToolCallEvent(step=2, tool=SEARCH, query='who "approves" it\nnow', chunks=5, kept=0, page=2,
                   sub_question=1),
     'step=2 tool=search_knowledge_base query="who \'approves\' it\nnow" page=2 chunks=5 kept=0',
     'Searched "who "approves" it now": kept 0 of 5 passages',
     li(2, SEARCH, ' <q>who "approves" it\nnow</q> <span class="counts">kept 0/5 chunks</span>',
        "search")),
    (ToolCallEvent(step=2, tool=SEARCH, query="x", chunks=5),
     'step=2 tool=search_knowledge_base query="x" chunks=5',
     'Searched "x": kept 0 of 5 passages',
     li(2, SEARCH, ' <q>x</q> <span class="counts">kept ?/5 chunks</span>', "search")),
    (ToolCallEvent(step=3, tool=SEARCH, query="?!", error="no words to search for"),
     'step=3 tool=search_knowledge_base query="?!" error="no words to search for"',
     'Searched "?!" — failed: no words to search for',
     li(3, SEARCH, ' <q>?!</q><span class="error"> error: no words to search for</span>',
        "search")),
    (ToolCallEvent(step=4, tool=FETCH, doc_id="policy", section="2.3", chars=1234),
     "step=4 tool=fetch_document_section doc_id=policy section=2.3 chars=1234",
     "Read policy §2.3",
     li(4, FETCH, f' read {button("policy", "2.3")}<span class="muted"> (1234 chars)</span>',
        "fetch")),
    (ToolCallEvent(step=4, tool=FETCH, doc_id="policy", section="9",
                   error="no section 9 in policy"),
     'step=4 tool=fetch_document_section doc_id=policy section=9 error="no section 9 in policy"',
     "Read policy §9 — failed: no section 9 in policy",
     li(4, FETCH, f' read {button("policy", "9")}'
                  '<span class="error"> error: no section 9 in policy</span>', "fetch")),
    (ToolCallEvent(step=5, tool=LIST, documents=7),
     "step=5 tool=list_documents documents=7", "Listed the documents (7)",
     li(5, LIST, " 7 documents")),
    (ToolCallEvent(step=5, tool=LIST, error="boom"),
     'step=5 tool=list_documents error="boom"', "Called list_documents — failed: boom",
     li(5, LIST, '<span class="error"> error: boom</span>')),
    (ToolCallEvent(step=6, tool="ask_user", error="ask_user is not available"),
     'step=6 tool=ask_user error="ask_user is not available"',
     "Called ask_user — failed: ask_user is not available",
     li(6, "ask_user", '<span class="error"> error: ask_user is not available</span>')),
    # main showed "  documents" here (no document count on an ask_user step): a bug, fixed
    (ToolCallEvent(step=6, tool="ask_user", reason="Which year?"),
     'step=6 tool=ask_user reason="Which year?"', "Called ask_user", li(6, "ask_user", "")),
]


class WithSpread(ToolCallEvent):
    """A tool call with one field more, as a change to ToolCallEvent would add it."""

    spread: int | None = None


NEW = WithSpread(step=2, tool=SEARCH, query="travel approval", chunks=8, kept=3, spread=4)


@pytest.mark.parametrize(("event", "log", "v1", "_page"), GOLDEN)
def test_existing_events_render_as_before(event, log, v1, _page):
    assert log_line(event) == log
    assert step_line(event) == v1


def test_long_query_is_cut_in_the_log_line_only_as_before():
    event = ToolCallEvent(step=3, tool=SEARCH, query="clove " * 20_000, chunks=1, kept=1)
    assert log_line(event) == (f'step=3 tool=search_knowledge_base query="{("clove " * 40)[:200]}'
                               '… (120000 characters)" chunks=1 kept=1')
    assert step_line(event) == f'Searched "{("clove " * 27)[:159]}…": kept 1 of 1 passages'


def test_a_new_field_shows_in_the_log_cli_v1_and_page_payload(capsys):
    assert [(f.key, f.role) for f in NEW.shown()] == [
        ("query", "said"), ("chunks", "said"), ("kept", "said"), ("spread", "extra")]
    line = log_line(NEW)
    assert line == ('step=2 tool=search_knowledge_base query="travel approval" chunks=8 kept=3'
                    ' spread=4')
    print_event(NEW, debug=False)  # the CLI prints the log line as it is
    assert capsys.readouterr().err.strip() == line
    assert step_line(NEW) == 'Searched "travel approval": kept 3 of 8 passages (spread 4)'
    payload = json.loads(_event_payload("r1", NEW))
    assert payload["data"]["spread"] == 4  # stored and streamed as every field is
    assert payload["shown"] == tool_pieces(NEW)
    assert {"text": " (spread 4)", "as": "muted"} in payload["shown"]["pieces"]


def test_one_builder_of_search_events():
    hits = [Hit(chunk_id=i, doc_id="d", section="1", section_title="", text="t")
            for i in range(3)]
    graded = search_event("q", hits, kept=hits[:1], page=2, reason="why", sub_question=1)
    assert graded.data == {"tool": SEARCH, "query": "q", "page": 2, "chunks": 3, "kept": 1,
                           "sub_question": 1, "reason": "why"}
    ungraded = search_event("q", hits, page=1)  # page 1 and no grade: left unset
    assert ungraded.data == {"tool": SEARCH, "query": "q", "chunks": 3}
    failed = search_event("?!", error="no words")
    assert failed.data == {"tool": SEARCH, "query": "?!", "error": "no words"}


@pytest.fixture(scope="module")
def live(small_kb_template, tmp_path_factory):
    kb = copy_kb(small_kb_template, tmp_path_factory.mktemp("display") / "kb")
    try:
        with serving(kb) as server:
            yield server
    finally:
        kb.close()


def test_the_sse_payload_carries_each_tool_calls_line_for_the_page(live):
    with live.client() as client:
        run_id = client.post("/runs", json={"question": "Who approves travel expenses above"
                                            " £2,500?", "route": "agent"}).json()["run_id"]
        with client.stream("GET", f"/runs/{run_id}/events") as response:
            steps = [d for e, _, d in read_sse(response) if e == "step"]
    calls = [s for s in steps if s["kind"] == "tool_call"]
    assert calls and all(s["shown"]["pieces"] for s in calls)
    for s in calls:
        event = event_from(s["kind"], s["step"], s["data"], seq=s["seq"], ts=s["ts"])
        assert s["shown"] == tool_pieces(event)  # type: ignore[arg-type]
    assert all("shown" not in s for s in steps if s["kind"] != "tool_call")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="the page check needs chromium")
def test_the_page_puts_in_the_lines_the_server_makes(live):
    from playwright.sync_api import sync_playwright

    payloads = [json.loads(_event_payload("r1", e)) for e, *_ in GOLDEN]
    payloads.append(json.loads(_event_payload("r1", NEW)))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(live.url + "/")
            html = page.evaluate("(ps) => ps.map((p) => stepLine(p).outerHTML)", payloads)
        finally:
            browser.close()
    assert html[:-1] == [want for *_, want in GOLDEN]
    assert html[-1] == li(2, SEARCH, ' <q>travel approval</q> <span class="counts">kept 3/8'
                                     ' chunks</span><span class="muted"> (spread 4)</span>',
                          "search")
