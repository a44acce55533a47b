"""The run page and the dashboard in a real headless Chromium (Playwright), against the real app.

Needs Debian's chromium at /usr/bin/chromium (`apt-get install -y chromium`; the Makefile's
test setup installs it). Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_server import LiveServer, copy_kb, offline_settings

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
MULTI_HOP = "Who approves travel expenses above £2,500, and who is that person?"

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError("chromium is missing: run `apt-get install -y chromium`")
    pytest.skip("chromium is missing: `apt-get install -y chromium`", allow_module_level=True)


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
    page.goto(server.url + "/")
    assert page.locator("#auth").is_hidden()  # no key needed on loopback without one
    page.fill("#question", MULTI_HOP)
    page.select_option("#route", "agent")
    page.click("#ask-button")

    searches = page.locator("li.step[data-tool='search']")
    searches.first.wait_for(timeout=60_000)
    page.locator("#run-status[data-status='answered']").wait_for(timeout=60_000)
    first = searches.first.inner_text()
    assert "kept" in first and "chunks" in first and "“" not in first  # query shown in <q>
    assert page.locator("li.step[data-kind='route']").count() == 1
    assert page.locator("li.step[data-kind='grade']").count() >= 1
    assert "step" in page.locator("li.step[data-kind='grade']").first.inner_text()
    seqs = [int(s) for s in page.locator("li.step").evaluate_all(
        "items => items.map(i => i.dataset.seq)")]
    assert seqs == list(range(len(seqs)))  # every event once, in order

    answer = page.locator("#answer")
    assert answer.inner_text().strip()
    cite = page.locator("#answer a.cite").first
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
    assert "steps" in page.locator("#run-meta").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-ask.png"), full_page=True)

    # the run page reopens a finished run from its URL (replayed from the store)
    run_id = page.url.split("run=")[1]
    page.goto(f"{server.url}/?run={run_id}")
    page.locator("#run-status[data-status='answered']").wait_for(timeout=30_000)
    assert page.locator("li.step").count() == len(seqs)


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
        for _ in range(2):
            rid = store.start("a question that ran out of steps", max_steps=2)
            store.finish(rid, {"status": "truncated", "steps": 2, "latency_s": 0.5,
                               "usage": {"cost_usd": 0.002}})
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
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-dashboard.png"), full_page=True)
    # a run in the list opens on the run page
    page.locator("#runs-table tbody tr a").first.click()
    page.locator("#run-status.badge").wait_for()
    page.wait_for_function("() => document.getElementById('run-status').dataset.status"
                           " && document.getElementById('run-status').dataset.status"
                           " !== 'running'", timeout=30_000)


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
