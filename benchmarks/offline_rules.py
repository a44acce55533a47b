"""One offline rule switched off, the eval run again: what does the rule do on a set?

    .venv/bin/python benchmarks/offline_rules.py RULE DATASET --kb KB --out OUT [eval options]
    .venv/bin/python benchmarks/honest_answers.py WITH/results.jsonl OUT/results.jsonl

RULE is one of the names below (or `none` for the rules as shipped), or `support=X`: the
answerer's support threshold set to X through the user's setting (RAGLOOP_STRICTNESS, as
`--strict X` does), to trace the trade between declining unanswerable questions and declining
answerable ones, or `give-up=X`: the placement policy's knob (agent/placement.py,
`Policy.give_up_below`) set to X. The rule is switched off in this process
only (the code is patched here, not configured; a patch of a name the code no longer has is an
error, not a silent no-op), then `ragloop eval` runs with the remaining arguments. Compare
the two runs with honest_answers.py: a rule stays only if it helps on a set other than the one
it was written for (offline/README.md lists the results).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def _replace(owner: Any, name: str, value: Any) -> None:
    """Set `owner.name`, which must exist: a switch for a rule that is gone must fail."""
    if not hasattr(owner, name):
        raise SystemExit(f"{getattr(owner, '__name__', owner)} has no {name}: the rule is gone")
    setattr(owner, name, value)


def _no_gap_stop() -> None:
    import itertools

    import ragloop.agent.pipeline_driver as driver

    smaller = itertools.count(0, -1)
    _replace(driver, "gap_size", lambda missing, rd: next(smaller))  # every re-query "narrows"


def _no_single_shot_places() -> None:
    import ragloop.agent.pipeline_driver as driver

    _replace(driver.PipelineDriver, "_keep_single_shot", lambda self, ctx, ordered: ordered)


def _no_agreement() -> None:
    import ragloop.offline.grader as grader

    _replace(grader, "AGREEMENT_FLOOR", float("inf"))  # retrievers agreeing keeps no hit


def _no_code_penalty() -> None:
    import ragloop.offline.grader as grader

    _replace(grader, "code_penalty", lambda question_codes, hit_text, rd: 1.0)


def _no_planner_split() -> None:
    from ragloop.core.decisions import Plan
    from ragloop.offline.planner import LocalPlanner

    plan = LocalPlanner.plan

    def whole(self, question):
        made = plan(self, question)
        return Plan(True, [question], reason="one part") if made.need_search else made

    _replace(LocalPlanner, "plan", whole)


def _no_title_links() -> None:
    from ragloop.offline.follow_ups import LocalFollowUps

    _replace(LocalFollowUps, "_titled", lambda self, text, skip=None, question=None: [])


def _no_absent_codes() -> None:
    import ragloop.offline.answerer as answerer
    from ragloop.language.text import Reading

    if not hasattr(Reading, "absent_codes"):
        raise SystemExit("Reading has no absent_codes: the rule is gone")

    class AnswersAnyway(Reading):  # the answerer's reading only: the agent's check stays
        def absent_codes(self, question: str, held: set[str]) -> list[str]:
            return []  # a code no evidence names: answer anyway

    init = answerer.ExtractiveAnswerer.__init__

    def answering_anyway(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.reading = AnswersAnyway(self.reading.code, self.reading.rules,
                                     self.reading.stemmer)

    _replace(answerer.ExtractiveAnswerer, "__init__", answering_anyway)


def _no_conflict_notes() -> None:
    from ragloop.offline.answerer import ExtractiveAnswerer

    _replace(ExtractiveAnswerer, "_conflicts", lambda self, chosen: [])


def _no_nearest() -> None:
    from ragloop.agent.pipeline_driver import PipelineDriver

    _replace(PipelineDriver, "_add_nearest", lambda self, ctx, part: None)


def _no_chain_reads() -> None:
    import ragloop.agent.pipeline_driver as driver

    _replace(driver, "FOLLOW_READ_POINTERS", False)


def _policy(**change: Any) -> None:
    """Replace the placement policy's fields (agent/placement.py) for this process."""
    from dataclasses import replace

    import ragloop.agent.placement as placement

    _replace(placement, "DEFAULT_POLICY", replace(placement.DEFAULT_POLICY, **change))


def _without(*hops: str) -> Callable[[], None]:
    """Switch hop kinds off: they no longer earn a single-shot document's place."""
    def switch() -> None:
        from ragloop.agent.placement import DEFAULT_POLICY, Hop

        _policy(signals=DEFAULT_POLICY.signals - {Hop(h) for h in hops})
    return switch


def _no_depth() -> None:
    import ragloop.agent.pipeline_driver as driver

    _replace(driver, "DEPTH_FOLLOWS_PARTS", False)


def _support(value: str) -> None:
    import os

    # the user's setting (RAGLOOP_STRICTNESS / --strict), not a patch: what a user gets
    os.environ["RAGLOOP_STRICTNESS"] = str(float(value))


def _light_stem() -> None:
    import ragloop.language.text as text

    # every language read with the light English stemmer, as before issue 42
    _replace(text, "stemmer_of", lambda code: text.LIGHT)
    text.reading.cache_clear()


RULES: dict[str, Callable[[], None]] = {
    "none": lambda: None,
    "gap-stop": _no_gap_stop,  # a re-query that does not narrow the gap ends the part
    "single-shot-places": _no_single_shot_places,  # the evidence keeps single-shot's places
    "agreement": _no_agreement,  # grader: a hit both retrievers rank near the top is kept
    "code-penalty": _no_code_penalty,  # grader: a hit naming another code of the family
    "planner-split": _no_planner_split,  # planner: dates, halves, comparisons, lists, clauses
    "title-links": _no_title_links,  # follow-ups: one-passage documents a chunk names
    "absent-codes": _no_absent_codes,  # answerer: decline a part whose code no source names
    "conflict-notes": _no_conflict_notes,  # answerer: "the sources disagree" notes
    "nearest": _no_nearest,  # driver: an unanswered part's nearest passages, unconfirmed
    # placement (issue 27): which hops earn a single-shot document's place
    "hop-places": _without("pointer", "named", "bridge", "second_hop", "covers_part"),
    "pointer": _without("pointer"),  # a kept chunk names it, the question does not
    "named": _without("named"),  # the question names it by title
    "bridge": _without("bridge"),  # a re-query naming its title found it
    "second-hop": _without("second_hop"),  # its own sub-question's search kept it
    "covered-parts": _without("covers_part"),  # kept for a part single-shot left open
    "depth": _no_depth,  # driver: a part single-shot's search answers gets its own search
    "chain-reads": _no_chain_reads,  # driver: a section read through a pointer is followed on
    "light-stem": _light_stem,  # the language's stemmer (Snowball for Italian): the light one
}


def main() -> int:
    rule = sys.argv[1] if len(sys.argv) > 1 else ""
    if rule.startswith("support="):
        _support(rule.removeprefix("support="))
    elif rule.startswith("give-up="):
        _policy(give_up_below=float(rule.removeprefix("give-up=")))
    elif rule in RULES:
        RULES[rule]()
    else:
        print(__doc__)
        print("rules:", ", ".join(RULES), "or support=X or give-up=X")
        return 2
    from ragloop.apps.cli import main as cli_main

    sys.argv = ["ragloop", "eval", *sys.argv[2:]]
    cli_main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
