"""The sentence each citation stands on (agent/quotes.py), which the page marks in the section."""

from __future__ import annotations

from ragloop.agent.quotes import best_sentence, with_quotes
from ragloop.core.decisions import Evidence
from ragloop.language.text import ENGLISH_READING

PASSAGE = ("Expenses up to £2,500 are approved by the line manager. Expenses above £2,500 per"
           " trip must be approved by the Chief Financial Officer. See section 4.1 for booking.")


def _ev(n: int, text: str) -> Evidence:
    return Evidence(n=n, doc_id="policies/travel.md", section="4.2", section_title="Approvals",
                    text=text, step=1)


def test_the_closest_sentence_of_the_passage_is_the_quote() -> None:
    claim = "Trips above £2,500 need the Chief Financial Officer's approval."
    assert best_sentence([claim], PASSAGE, ENGLISH_READING) == (
        "Expenses above £2,500 per trip must be approved by the Chief Financial Officer.")
    assert best_sentence(["Penguins live in Antarctica."], PASSAGE, ENGLISH_READING) is None


def test_each_citation_gets_the_sentence_its_own_claims_rest_on() -> None:
    text = ("The line manager approves expenses up to £2,500 [1]. Above that the Chief"
            " Financial Officer approves [2].")
    evidence = {1: _ev(1, PASSAGE), 2: _ev(2, PASSAGE)}
    cites = [{"n": 1, "doc_id": "policies/travel.md", "section": "4.2"},
             {"n": 2, "doc_id": "policies/travel.md", "section": "4.2"},
             {"n": 3, "doc_id": "gone.md", "section": "1"}]
    out = with_quotes(text, cites, evidence.get, ENGLISH_READING)
    assert out[0]["quote"].startswith("Expenses up to £2,500")
    assert out[1]["quote"].startswith("Expenses above £2,500")
    assert out[2] == cites[2]  # no passage, no quote: the citation as it was
    assert "quote" not in cites[0]  # the checked citations themselves are left alone
