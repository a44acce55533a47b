"""The run page and the dashboard in a real headless Chromium (Playwright), against the real app.

Needs Debian's chromium (`apt-get install -y chromium`; `make test` installs it when it runs
as root with apt available). Without it these tests are skipped, saying so; with CI set they
fail instead. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from test_server import LiveServer, copy_kb, offline_settings

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
MULTI_HOP = "Who approves travel expenses above £2,500, and who is that person?"

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError("chromium is missing: run `apt-get install -y chromium`")
    pytest.skip("the browser tests need chromium, which is not installed (make test installs"
                " it with apt-get when run as root; else `sudo apt-get install -y chromium`)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def live(small_kb_template, tmp_path_factory):
    from ragloop.apps.server.app import create_app

    kb = copy_kb(small_kb_template, tmp_path_factory.mktemp("web") / "kb")
    try:
        with LiveServer(create_app(offline_settings(kb), kb=kb)) as server:
            yield server, kb
    finally:
        kb.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, errors


def test_ask_watch_the_agent_and_open_a_citation(live, page):
    server, _kb = live
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server.url + "/")
    assert page.locator("#auth").is_hidden()  # no key needed on loopback without one
    page.fill("#question", MULTI_HOP)
    page.select_option("#route", "agent")
    page.click("#ask-button")

    turn = page.locator("#thread .turn").first
    turn.locator(".run-status[data-status='answered']").wait_for(timeout=60_000)
    searches = turn.locator("li.step[data-tool='search']")
    first = searches.first.text_content()  # the steps are folded: their text is still there
    assert "kept" in first and "chunks" in first and "“" not in first  # query shown in <q>
    assert turn.locator("li.step[data-kind='route']").count() == 1
    assert turn.locator("li.step[data-kind='grade']").count() >= 1
    # the agent's final order says why each document holds its place, in words
    placement = turn.locator("li.step[data-kind='placement']")
    assert placement.count() == 1
    said = placement.text_content()
    assert "kept its place (#1 of the first search)" in said, said
    assert "single" not in said
    seqs = [int(s) for s in turn.locator("li.step").evaluate_all(
        "items => items.map(i => i.dataset.seq)")]
    assert seqs == sorted(set(seqs))  # every event once, in order

    # the answer is what a user reads first: above the steps, in view at 1280x800, and the
    # steps folded into one line once it started
    answer = turn.locator(".answer")
    assert answer.inner_text().strip()
    assert answer.get_attribute("aria-live") == "polite"
    box = answer.bounding_box()
    steps = turn.locator("details.steps-box")
    assert box is not None and box["y"] + 40 < 800
    assert box["y"] < steps.bounding_box()["y"]
    assert steps.get_attribute("open") is None
    summary = steps.locator("summary").inner_text()
    assert " steps · " in summary and "search" in summary and "kept" in summary
    # each passage counted once, however many searches kept it
    run_id = turn.get_attribute("data-run")
    kept = {v["chunk_id"] for e in _kb.backend.runs.events(run_id) if e.kind == "grade"
            for v in e.data["verdicts"][:e.data["kept"]]}
    assert summary.endswith(f" · {len(kept)} passage{'s' if len(kept) != 1 else ''} kept")
    assert turn.locator("li.step").first.is_hidden()
    steps.locator("summary").click()  # a button-like summary opens the steps
    assert turn.locator("li.step").first.is_visible()
    assert turn.locator(".sources li").count() >= 1
    # each source shows the sentence it stands on (the answer event's citations carry it)
    assert turn.locator(".sources .source-quote").first.inner_text().strip().startswith("“")

    cite = turn.locator(".answer button.cite").first
    cite.wait_for()
    doc, section = cite.get_attribute("data-doc"), cite.get_attribute("data-section")
    cite.click()
    text = page.locator("#section-text")
    page.wait_for_function(
        "() => document.getElementById('section-text').textContent.length > 20")
    assert not page.locator("#section-panel").is_hidden()
    assert f"{doc} §{section}" in page.locator("#section-title").inner_text()
    expected = _kb.section(doc, section).text.strip()[:40]
    assert expected in text.inner_text()
    # the sentence the citation stands on is marked in the section, and it is the answer's
    mark = page.locator("#section-text mark.cited")
    mark.wait_for()
    marked = " ".join(mark.inner_text().split())
    assert marked and marked in " ".join(_kb.section(doc, section).text.split())
    assert marked.rstrip(".") in answer.inner_text()
    assert page.locator("#section-quote-note").is_hidden()
    assert "steps" in turn.locator(".run-meta").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-ask.png"), full_page=True)
    assert page.evaluate("document.activeElement.id") == "section-title"  # focus follows
    page.click("#close-section")
    assert page.locator("#section-panel").is_hidden()
    assert page.evaluate("document.activeElement.classList.contains('cite')")  # focus returns
    page.keyboard.press("Enter")  # the focused citation is a button: Enter opens it again
    page.locator("#section-panel:not([hidden])").wait_for()
    page.keyboard.press("Escape")
    assert page.locator("#section-panel").is_hidden()

    # the run page reopens a finished run from its URL (replayed from the store)
    url = page.url
    page.goto(url)
    turn = page.locator("#thread .turn").first
    turn.locator(".run-status[data-status='answered']").wait_for(timeout=30_000)
    assert turn.locator("li.step").count() == len(seqs)


def test_empty_question_shows_the_api_error(live, page):
    server, _ = live
    page.goto(server.url + "/")
    page.evaluate("document.getElementById('question').removeAttribute('required')")
    page.fill("#question", "   ")
    page.click("#ask-button")
    page.locator("#form-error:not([hidden])").wait_for(timeout=10_000)
    assert "422" in page.locator("#form-error").inner_text()


def test_dashboard_shows_figures_and_flags_truncation(live, page):
    from ragloop.storage.sqlite.runs import SqliteRunStore as RunStore

    server, kb = live
    store = RunStore(kb.store.db_path)
    try:  # two runs that hit the ceiling: well above 10% of the runs so far
        # the newest: one of its two model calls reported no usage (a streamed reply of
        # llama-cpp-python's server), so its usage is unknown, not $0
        for usage in ({"cost_usd": 0.002, "calls": 1},
                      {"cost_usd": 0.0, "calls": 2, "unmeasured": 1}):
            rid = store.start("a question that ran out of steps", max_steps=2)
            store.finish(rid, {"status": "truncated", "steps": 2, "latency_s": 0.5,
                               "usage": usage})
    finally:
        store.close()
    page.goto(server.url + "/dashboard")
    rows = page.locator("#runs-table tbody tr")
    rows.first.wait_for(timeout=30_000)
    assert rows.count() >= 2
    assert int(page.locator("#m-runs .value").inner_text()) >= 2
    truncated = page.locator("#m-truncated")
    assert "warn" in (truncated.get_attribute("class") or "")
    # they also used every step: a figure of its own, beside "forced to answer"
    every = page.locator("#m-all-steps")
    assert "used every step" in every.inner_text() and "forced" in truncated.inner_text()
    assert "warn" in (every.get_attribute("class") or "")
    color = truncated.locator(".value").evaluate("e => getComputedStyle(e).color")
    assert color == "rgb(179, 38, 30)"  # red
    assert page.locator("#chart-latency rect").count() >= 2
    assert page.locator("#chart-cost rect").count() >= 2
    assert rows.first.locator("td").nth(5).inner_text() == "unknown"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-dashboard.png"), full_page=True)
    # a run in the list opens on the run page
    page.locator("#runs-table tbody tr a").first.click()
    page.locator(".turn .run-status").wait_for()
    page.wait_for_function("() => { const s = document.querySelector('.turn .run-status');"
                           " return s && !['running', 'queued'].includes(s.dataset.status); }",
                           timeout=30_000)
    meta = page.locator(".turn .run-meta")
    meta.filter(has_text="usage unknown").wait_for(timeout=10_000)
    assert "1 of 2 model calls reported none" in meta.inner_text()
    assert "$0.0000" not in meta.inner_text()


@pytest.mark.parametrize("path, ready", [("/docs", ".swagger-ui .info .title"),
                                         ("/redoc", "h1")])
def test_api_docs_render_offline(live, browser, path, ready):
    """/docs and /redoc load their code, styles and data from this server only: every request
    that would leave it is recorded and aborted, and the page still renders the API's title and
    its routes. ReDoc's bundle links its "API docs by Redocly" logo to its CDN: the page's
    Content-Security-Policy keeps the browser from even asking, so no request leaves."""
    server, _ = live
    context = browser.new_context()
    outside: list[str] = []

    def only_local(route):
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    pg = context.new_page()
    try:
        pg.goto(server.url + path)
        pg.wait_for_selector(ready, timeout=30_000)
        assert "ragloop" in pg.inner_text(ready)
        pg.wait_for_selector("text=/runs", timeout=30_000)
    finally:
        context.close()
    assert not outside, outside


def _settled(turn) -> None:
    turn.locator(".run-status:not([data-status='running']):not([data-status='queued'])"
                 ).wait_for(timeout=60_000)


HOSTILE = ("The Zephyr gateway admin password is rotated by <img src=x onerror=\"window.__xss=1\">"
           " the security desk every 90 days.\n\nZephyr logs go to <script>window.__xss=2"
           "</script> the audit bucket.\n")


def serving_with(template, folder, files: dict[str, str]):
    """A live offline server over a copy of the small knowledge base with `files` uploaded
    (name: text) through the API."""
    from ragloop.apps.server.app import create_app

    kb = copy_kb(template, folder)
    try:
        with LiveServer(create_app(offline_settings(kb), kb=kb)) as server:
            reply = httpx.post(server.url + "/documents", timeout=120, files=[
                ("files", (name, text.encode(), "text/plain")) for name, text in files.items()])
            assert reply.status_code == 200, reply.text
            yield server
    finally:
        kb.close()


@pytest.fixture(scope="module")
def hostile(small_kb_template, tmp_path_factory):
    """A server whose knowledge base holds a document of markup meant to run in the page."""
    yield from serving_with(small_kb_template, tmp_path_factory.mktemp("hostile") / "kb",
                            {"zephyr.txt": HOSTILE})


def test_document_text_is_shown_as_text_never_as_markup(hostile, page):
    page.goto(hostile.url + "/")
    page.fill("#question", "How often is the Zephyr gateway admin password rotated?")
    page.select_option("#route", "single")
    page.click("#ask-button")
    turn = page.locator("#thread .turn").first
    _settled(turn)
    assert "<img src=x" in turn.locator(".answer").inner_text()
    turn.locator(".answer button.cite").first.click()
    page.wait_for_function("() => document.getElementById('section-text').textContent"
                           ".includes('<script>')")
    assert "<img src=x" in page.locator("#section-text mark.cited").inner_text()
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("window.__xss") is None


def test_a_follow_up_is_the_second_turn_of_the_same_conversation(live, page):

    server, _ = live
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server.url + "/")
    page.fill("#question", "Who approves travel expenses above £2,500?")
    page.select_option("#route", "single")
    page.click("#ask-button")
    first = page.locator("#thread .turn").nth(0)
    _settled(first)
    assert "conversation=" in page.url
    conversation = page.url.split("conversation=")[1]
    # the follow-up box sits under the answer, and the keyboard lands in it
    followup = page.locator("#followup")
    # the box is shown and focused just after the turn's status settles (the run's end event
    # first, then the page leaves its busy state): wait for it, as a reader's eye would
    followup.wait_for(state="visible", timeout=30_000)
    page.wait_for_function("() => document.activeElement && document.activeElement.id"
                           " === 'followup'", timeout=30_000)
    assert followup.bounding_box()["y"] > first.locator(".answer").bounding_box()["y"]
    followup.fill("And who is that person?")
    page.click("#followup-button")
    second = page.locator("#thread .turn").nth(1)
    _settled(second)
    assert page.locator("#thread .turn").count() == 2
    assert page.url.split("conversation=")[1] == conversation
    # what was searched: the follow-up made standalone from the first turn
    standalone = second.locator(".standalone")
    assert standalone.is_visible() and "Searched as" in standalone.inner_text()
    assert second.locator(".answer").inner_text().strip()

    stored = httpx.get(f"{server.url}/conversations/{conversation}", timeout=30).json()
    assert [t["question"] for t in stored["turns"]] == [
        "Who approves travel expenses above £2,500?", "And who is that person?"]
    # the list reopens it: both turns, replayed from the store
    item = page.locator(f"#conversations button[data-conversation='{conversation}']")
    item.wait_for(timeout=10_000)
    assert "2 turns" in item.inner_text()
    page.click("#new-conversation")
    assert page.locator("#thread .turn").count() == 0
    item.click()
    page.locator("#thread .turn").nth(1).wait_for(timeout=10_000)
    _settled(page.locator("#thread .turn").nth(1))
    assert item.get_attribute("aria-current") == "true"
    assert page.locator("#thread .turn .turn-question").all_inner_texts() == [
        "Who approves travel expenses above £2,500?", "And who is that person?"]
    assert page.locator("#thread .turn").nth(0).locator(".answer").inner_text().strip()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-thread.png"), full_page=True)


SIBLINGS = {
    "s100-datasheet.md": "# S100 Wireless Vibration Sensor Datasheet\n\n## Ingress protection\n\n"
                         "The S100 is an entry-level wireless vibration sensor rated IP65.\n",
    "s200-datasheet.md": "# S200 Industrial Vibration Sensor Datasheet\n\n## Ingress protection\n"
                         "\nThe S200 vibration sensor enclosure has an ingress protection rating"
                         " of IP67.\n",
    "s300-datasheet.md": "# S300 Hazardous-Area Vibration Sensor Datasheet\n\n## Ingress"
                         " protection\n\nThe S300 vibration sensor enclosure is rated IP68 for"
                         " hazardous areas.\n",
}


@pytest.fixture(scope="module")
def siblings(small_kb_template, tmp_path_factory):
    """A server whose knowledge base holds three sibling sensors a question may not name."""
    yield from serving_with(small_kb_template, tmp_path_factory.mktemp("siblings") / "kb",
                            SIBLINGS)


def test_a_question_with_several_readings_offers_buttons_that_continue(siblings, page):
    page.goto(siblings.url + "/")
    page.fill("#question", "What is the ingress protection rating of the vibration sensor?")
    page.click("#ask-button")
    first = page.locator("#thread .turn").nth(0)
    _settled(first)
    assert first.get_attribute("data-status") == "needs_input"
    options = first.locator(".clarify .options button")
    assert options.count() >= 2
    labels = options.all_inner_texts()
    assert "S200" in labels, labels
    assert first.locator(".clarify-question").inner_text().strip()
    assert first.locator(".answer").is_hidden()  # the question is not said twice
    # buttons are buttons, reachable in order, the first one focused for the keyboard
    assert options.evaluate_all("bs => bs.every(b => b.tagName === 'BUTTON')")
    # focus moves once the page leaves its busy state, just after the status settles
    page.wait_for_function("(label) => document.activeElement"
                           " && document.activeElement.textContent === label", arg=labels[0],
                           timeout=30_000)
    options.nth(labels.index("S200")).click()
    second = page.locator("#thread .turn").nth(1)
    _settled(second)
    assert second.locator(".turn-question").inner_text() == "S200"
    assert second.get_attribute("data-status") == "answered"
    assert "IP67" in second.locator(".answer").inner_text()
    assert options.evaluate_all("bs => bs.every(b => b.disabled)")  # one choice per question
    # the choice is the next turn of the same conversation, narrowed with the question asked
    conversation = page.url.split("conversation=")[1]
    stored = httpx.get(f"{siblings.url}/conversations/{conversation}", timeout=30).json()
    turns = stored["turns"]
    assert [t["status"] for t in turns] == ["needs_input", "answered"]
    assert turns[1]["run_id"] == second.get_attribute("data-run")
    # what was searched: the choice joined with the question it answers (the stored turn's
    # status tells the condense step that turn asked back)
    assert "S200" in turns[1]["standalone"] and "ingress" in turns[1]["standalone"]
    assert "Searched as" in second.locator(".standalone").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-clarify.png"), full_page=True)


SLOW_ANSWER = ("Expenses above £2,500 per trip must be approved by the Chief Financial Officer"
               " [1][7]. Expenses up to £2,500 are approved by the line manager [1].")


def slow_model(piece_s: float):
    """A scripted model that searches once, then writes its answer a word at a time, each
    word `piece_s` after the last (as a real model streams its tokens)."""
    from ragloop.core.types import Usage
    from ragloop.llm.base import ChatResponse, ToolCall
    from ragloop.llm.scripted import ScriptedChat, text_pieces

    class SlowChat(ScriptedChat):
        def stream(self, messages, **options):
            reply = self.chat(messages, **options)
            for piece in text_pieces(reply.text):
                time.sleep(piece_s)
                yield piece
            return reply

    search = ChatResponse(text="", tool_calls=[ToolCall(id="c1", name="search_knowledge_base",
                                                        arguments={"query": "travel approval"})],
                          usage=Usage(input_tokens=100, output_tokens=10, calls=1))
    return SlowChat([search, SLOW_ANSWER], repeat_last=True)


def test_the_answer_streams_before_the_run_ends_then_shows_the_checked_text(live, page):
    server, _ = live
    engine = server.server.config.app.state.ragloop.engine
    engine.chat, before = slow_model(0.15), engine.chat
    try:
        started = httpx.post(server.url + "/runs", timeout=30, json={
            "question": "Who approves travel above £2,500?", "route": "agent",
            "driver": "tools", "conversation_id": "new"}).json()
        page.goto(f"{server.url}/?run={started['run_id']}")
        turn = page.locator("#thread .turn").first
        # a part of the answer is on the page while the run is still running
        page.wait_for_function("() => { const a = document.querySelector('.turn .answer');"
                               " return a && a.textContent.length > 10; }", timeout=60_000)
        run = httpx.get(f"{server.url}/runs/{started['run_id']}", timeout=30).json()
        assert run["status"] == "running"
        assert turn.locator(".answer").get_attribute("aria-busy") == "true"
        partial = turn.locator(".answer").inner_text()
        assert SLOW_ANSWER.startswith(partial.strip()[:10])
        assert turn.locator("details.steps-box").get_attribute("open") is None  # folded
        _settled(turn)
    finally:
        engine.chat = before
    # the checked text replaces the streamed one, and says which citation the check took out
    assert "[7]" not in turn.locator(".answer").inner_text()
    assert turn.locator(".answer button.cite").count() >= 1
    note = turn.locator(".check-note")
    assert note.is_visible() and "[7]" in note.inner_text()
    assert turn.locator(".answer").get_attribute("aria-busy") == "false"


@pytest.fixture(scope="module")
def two_kbs(small_kb_template, tmp_path_factory):
    """Two knowledge bases served at once (copies of one, named a and b)."""
    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings
    from ragloop.kb.catalog import CatalogEntry

    root = tmp_path_factory.mktemp("web-two")
    entries = [CatalogEntry(n, str(shutil.copytree(small_kb_template, root / n)))
               for n in ("a", "b")]
    settings = Settings().with_(model="offline", kb=entries[0].location)
    with LiveServer(create_app(settings, catalog=entries)) as server:
        yield server


def test_an_upload_goes_to_the_knowledge_base_chosen(two_kbs, live, page):
    page.goto(live[0].url + "/")
    page.locator("#upload-box[data-ready]").wait_for()
    assert page.locator("#upload-kb-label").is_hidden()  # one KB served: no selector

    page.goto(two_kbs.url + "/")
    page.locator("#upload-box[data-ready]").wait_for()
    page.click("#upload-box summary")
    assert page.locator("#upload-kb option").all_text_contents() == ["choose…", "a", "b"]
    memo = {"name": "memo.md", "mimeType": "text/markdown",
            "buffer": b"# Memo\n\nThe office closes on 24 December.\n"}
    page.set_input_files("#upload-files", files=[memo])
    page.click("#upload-button")  # no KB chosen: the form does not send it
    page.select_option("#upload-kb", "b")
    page.click("#upload-button")
    page.locator("#upload-result", has_text="1 added").wait_for(timeout=60_000)
    assert "into b" in page.locator("#upload-result").text_content()
    docs = httpx.get(two_kbs.url + "/documents").json()["documents"]
    assert [d["kb"] for d in docs if d["doc_id"] == "memo.md"] == ["b"]


def test_a_citation_opens_its_section_from_the_kb_it_names(two_kbs, page):
    # both KBs hold the same doc ids: read without the citation's KB, the section is ambiguous
    page.goto(two_kbs.url + "/")
    page.fill("#question", "Is the T9 sensor waterproof?")
    page.click("#ask-button")
    turn = page.locator("#thread .turn").first
    turn.locator(".run-status[data-status='answered']").wait_for(timeout=60_000)
    cite = turn.locator(".answer button.cite").first
    kb = cite.get_attribute("data-kb")
    assert kb in ("a", "b")
    cite.click()
    page.wait_for_function("() => document.getElementById('section-text').textContent")
    assert "Could not load" not in page.locator("#section-text").inner_text()
    assert f"({kb})" in cite.get_attribute("title")
