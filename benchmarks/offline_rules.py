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


def _no_answer_entities() -> None:
    import ragloop.offline.answerer as answerer

    answerer.entities = lambda text: []  # a sentence need not name the question's names


def _no_answer_codes() -> None:
    import ragloop.offline.answerer as answerer

    answerer.codes = lambda text: []  # a sentence need not name the question's codes


def _no_absent_codes() -> None:
    import ragloop.offline.answerer as answerer

    answerer.absent_codes = lambda question, held: []  # a code no evidence names: answer anyway


def _no_conflict_notes() -> None:
    from ragloop.offline.answerer import ExtractiveAnswerer

    ExtractiveAnswerer._conflicts = lambda self, chosen: []


def _no_section_reads() -> None:
    import ragloop.offline.rewriter as rewriter
    from ragloop.agent.local import LocalFollowUps

    rewriter.section_links = lambda text: []  # a kept chunk's "see section 4.2"
    LocalFollowUps.referenced = lambda self, text: []  # the question's "section 2.3 of …"


def _no_nearest() -> None:
    from ragloop.agent.pipeline_driver import PipelineDriver

    PipelineDriver._add_nearest = lambda self, ctx, part: None


RULES: dict[str, Callable[[], None]] = {
    "none": lambda: None,
    "gap-stop": _no_gap_stop,  # a re-query that does not narrow the gap ends the part
    "single-shot-places": _no_single_shot_places,  # the evidence keeps single-shot's places
    "agreement": _no_agreement,  # grader: a hit both retrievers rank near the top is kept
    "code-penalty": _no_code_penalty,  # grader: a hit naming another code of the family
    "planner-split": _no_planner_split,  # planner: dates, halves, comparisons, lists, clauses
    "title-links": _no_title_links,  # follow-ups: one-passage documents a chunk names
    "answer-entities": _no_answer_entities,  # answerer: the question's names in the sentence
    "answer-codes": _no_answer_codes,  # answerer: the question's codes in the sentence
    "absent-codes": _no_absent_codes,  # answerer: decline a part whose code no source names
    "conflict-notes": _no_conflict_notes,  # answerer: "the sources disagree" notes
    "section-reads": _no_section_reads,  # driver: read the sections a chunk or question cites
    "nearest": _no_nearest,  # driver: an unanswered part's nearest passages, unconfirmed
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
