"""One offline rule switched off, the eval run again: what does the rule do on a set?

    .venv/bin/python benchmarks/offline_rules.py RULE DATASET --kb KB --out OUT [eval options]
    .venv/bin/python benchmarks/honest_answers.py WITH/results.jsonl OUT/results.jsonl

RULE is one of the names below (or `none` for the rules as shipped). The rule is switched off
in this process only (the code is patched here, not configured), then `ragloop eval` runs with
the remaining arguments. Compare the two runs with honest_answers.py: a rule stays only if it
helps on a set other than the one it was written for (offline/README.md lists the results).
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _no_gap_stop() -> None:
    import itertools

    import ragloop.agent.pipeline_driver as driver

    smaller = itertools.count(0, -1)
    driver.gap_size = lambda missing: next(smaller)  # every re-query "narrows" the gap


def _no_single_shot_places() -> None:
    import ragloop.agent.pipeline_driver as driver

    driver.PipelineDriver._keep_single_shot = lambda self, ctx, ordered: ordered


def _no_agreement() -> None:
    import ragloop.offline.grader as grader

    grader.AGREEMENT_FLOOR = float("inf")  # retrievers agreeing no longer keeps a hit


def _no_relative_floor() -> None:
    import ragloop.offline.grader as grader

    select = grader.select

    def absolute_only(scores, threshold, floor, max_keep, relative_floor, margin):
        return select(scores, threshold, floor, max_keep, float("inf"), margin)

    grader.select = absolute_only


def _no_code_penalty() -> None:
    import ragloop.offline.grader as grader

    grader.code_penalty = lambda question_codes, hit_text: 1.0


def _no_planner_split() -> None:
    from ragloop.core.decisions import Plan
    from ragloop.offline.planner import LocalPlanner

    plan = LocalPlanner.plan

    def whole(self, question):
        made = plan(self, question)
        return Plan(True, [question], reason="one part") if made.need_search else made

    LocalPlanner.plan = whole


def _no_title_links() -> None:
    from ragloop.agent.local import LocalFollowUps

    LocalFollowUps._titled = lambda self, text, skip=None, question=None: []


def _no_prf_terms() -> None:
    import ragloop.offline.rewriter as rewriter

    rewriter.tfidf_terms = lambda texts, exclude, n=5, **kw: []


RULES: dict[str, Callable[[], None]] = {
    "none": lambda: None,
    "gap-stop": _no_gap_stop,  # a re-query that does not narrow the gap ends the part
    "single-shot-places": _no_single_shot_places,  # the evidence keeps single-shot's places
    "agreement": _no_agreement,  # grader: a hit both retrievers rank near the top is kept
    "relative-floor": _no_relative_floor,  # grader: hits near the best one are kept too
    "code-penalty": _no_code_penalty,  # grader: a hit naming another code of the family
    "planner-split": _no_planner_split,  # planner: dates, halves, comparisons, lists, clauses
    "title-links": _no_title_links,  # follow-ups: one-passage documents a chunk names
    "prf-terms": _no_prf_terms,  # rewriter: pseudo-relevance terms of the kept chunks
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in RULES:
        print(__doc__)
        print("rules:", ", ".join(RULES))
        return 2
    RULES[sys.argv[1]]()
    from ragloop.apps.cli import main as cli_main

    sys.argv = ["ragloop", "eval", *sys.argv[2:]]
    cli_main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
