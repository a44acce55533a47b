""""Used every step" and "forced to answer" are two figures: a run can spend all its steps and
still end `answered` (the demo: 6/6 steps, status answered), which the dashboard used to
report as "runs at MAX_STEPS 0.0%" beside "mean steps 6.00"."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ragloop.apps.cli import app
from ragloop.eval.metrics import build_report, summarize
from ragloop.eval.report import markdown
from ragloop.storage.sqlite.runs import SqliteRunStore


def record_runs(store, runs) -> None:
    for status, steps, max_steps in runs:
        run_id = store.start("q", max_steps=max_steps)
        store.finish(run_id, {"status": status, "steps": steps, "latency_s": 1.0,
                              "usage": {"cost_usd": 0.0}})


def test_a_run_that_spent_every_step_is_counted_as_such(small_kb) -> None:
    store = SqliteRunStore(small_kb.store.db_path)
    try:  # the demo's run (6 of 6, answered), a forced answer, a run that stopped early
        record_runs(store, [("answered", 6, 6), ("truncated", 6, 6), ("answered", 2, 6),
                            ("answered", 3, 6)])
        m = store.metrics()
    finally:
        store.close()
    assert m.mean_steps == 4.25
    assert m.used_all_steps_pct == 50.0  # was reported nowhere: "at MAX_STEPS" read status
    assert m.truncated_pct == 25.0
    assert m.warn_used_all_steps and m.warn_truncated


def test_stats_shows_both_figures(small_kb) -> None:
    store = SqliteRunStore(small_kb.store.db_path)
    try:
        record_runs(store, [("answered", 6, 6), ("answered", 2, 6)])
    finally:
        store.close()
    folder = str(small_kb.store.folder)
    small_kb.close()
    shown = CliRunner().invoke(app, ["stats", "--kb", folder])
    assert shown.exit_code == 0, shown.output
    assert "runs that used every step  50.0%" in shown.output
    assert "runs forced to answer      0.0%" in shown.output
    assert "used every step (above 10%)" in shown.output  # the warning, on stderr
    as_json = json.loads(CliRunner().invoke(app, ["stats", "--kb", folder, "--json"]).stdout)
    assert (as_json["used_all_steps_pct"], as_json["truncated_pct"]) == (50.0, 0.0)


def test_the_eval_reports_both_per_path_and_type() -> None:
    records = [
        {"path": "agent", "type": "multi_hop", "status": "answered", "steps": 6, "max_steps": 6,
         "citation_support": {"checked": 4, "supported": 3, "claims": 2, "uncited_claims": 0,
                              "all_supported": False}},
        {"path": "agent", "type": "simple", "status": "truncated", "steps": 5, "max_steps": 6,
         "citation_support": {"checked": 2, "supported": 2, "claims": 2, "uncited_claims": 0,
                              "all_supported": True}},
        {"path": "single", "type": "simple", "status": "answered", "steps": 2, "max_steps": 6,
         "citation_support": {"checked": 0, "supported": 0, "claims": 0, "uncited_claims": 0,
                              "all_supported": False}},
    ]
    agent = summarize([r for r in records if r["path"] == "agent"], k=5)
    assert (agent["used_all_steps_pct"], agent["truncated_pct"]) == (50.0, 50.0)
    assert agent["citation_precision"] == 5 / 6 and agent["all_claims_supported"] == 0.5
    single = summarize([r for r in records if r["path"] == "single"], k=5)
    assert single["citation_precision"] is None and single["all_claims_supported"] is None
    text = markdown(build_report(records, k=5))
    assert "| used every step | 50.0% | 0.0% |" in text
    assert "| forced to answer (truncated) | 50.0% | 0.0% |" in text
    assert "agent every step" in text and "agent cite prec" in text
