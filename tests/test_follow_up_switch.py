"""A topic switch decided from retrieval (offline/follow_up.py `switched`, issue 40 pt 2) on a
real SQLite knowledge base: a question whose word and meaning searches agree on documents of
their own, none of them the conversation's, is searched as typed (a new topic, nothing
fused); a pronoun follow-up on the same conversation is still fused with the previous turn's
query and prior."""

from __future__ import annotations

import pytest
from conftest import write_docs

from ragloop.core.config import Settings
from ragloop.core.conversation import Turn, TurnKind
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.offline.follow_up import APART, RetrievalCondenser, ranked_documents, switched

DOCS = {
    "products/t9.md": "# T9 Sensor Datasheet\n\n## Battery\nThe T9 sensor's battery lasts five"
                      " years at one reading a minute.\n\n## Reset\nTo reset the T9 sensor,"
                      " hold its button for ten seconds until the light blinks.\n",
    "org/leadership.md": "# Leadership\n\nThe Chief Financial Officer of Northwind Labs is"
                         " Dana Reyes; she approves budgets and reports to the board.\n",
}
# more than APART documents of other subjects, so that "not among the best APART" can hold
DOCS.update({f"notes/{k}.md": f"# {k.title()}\n\n{v}\n" for k, v in {
    "holidays": "Employees get 25 days of annual leave and the public holidays.",
    "offices": "The Rotterdam office opens at eight; the Austin office at nine.",
    "returns": "A faulty product is returned within 30 days with an RMA number.",
    "security": "Passwords are rotated every 90 days and laptops are encrypted.",
    "canteen": "The canteen serves soup and sandwiches from noon until two.",
    "parking": "Staff park in the north garage; visitors use the front lot.",
    "travel": "Train travel is second class unless the trip takes more than four hours.",
    "payroll": "Salaries are paid on the 25th of each month by bank transfer.",
    "board": "The board of directors meets four times a year and elects its chair.",
    "hiring": "Every hiring manager interviews candidates with one colleague present.",
    "pension": "The company adds five percent of salary to each employee's pension.",
    "training": "New staff complete the safety course in their first week.",
    "expenses": "Expense claims need a receipt and the manager's approval.",
    "audit": "An external auditor reviews the annual accounts every spring.",
    "wellbeing": "Employees may book two sessions a year with a counsellor.",
    "recycling": "Paper, glass and plastic go in the bins on every floor.",
    "printers": "The printers on the third floor print double-sided by default.",
    "wifi": "Guests join the wireless network with the code at reception.",
    "gym": "The gym in the basement opens at six in the morning.",
    "library": "Books from the company library are borrowed for three weeks.",
    "bicycles": "Bicycles are stored in the covered rack behind the building.",
    "plants": "The office plants are watered every Monday by the facilities team.",
    "coffee": "The coffee machine on each floor is descaled once a month.",
    "mail": "Parcels for staff are kept at the post room until Friday.",
    "keys": "A lost door badge is replaced by security within a day.",
    "meetings": "Meeting rooms are booked in the calendar for at most two hours.",
    "volunteering": "Each employee may take one paid day a year to volunteer.",
    "languages": "Dutch lessons are offered to new colleagues on Tuesday evenings.",
    "fire": "The fire alarm is tested every Thursday at eleven.",
    "lockers": "Lockers in the changing room are emptied on the last day of the month.",
    "dress": "There is no dress code except on the production floor, where boots are worn.",
    "children": "Parents may bring their children to the office during school holidays.",
    "sabbatical": "After seven years of service an employee may take a three-month sabbatical.",
    "newsletter": "The internal newsletter is sent on the first Monday of every month.",
    "music": "The choir rehearses in the auditorium on Wednesday at lunch.",
    "garden": "The roof garden is open to everyone in summer.",
}.items()})
T9_QUESTION = "How long does the T9 sensor's battery last?"
SWITCH = "Who is the Chief Financial Officer of Northwind Labs?"


@pytest.fixture
def kb(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.open(path, Settings(kb=str(path)), language="en") as kb:
        kb.ingest([write_docs(tmp_path / "docs", DOCS)])
        yield kb


def test_a_switch_is_searched_as_typed_and_a_pronoun_follow_up_is_still_fused(kb):
    history = [Turn(T9_QUESTION, cited_docs=("products/t9.md",))]
    condenser = RetrievalCondenser(kb, ENGLISH_READING, switches=True)
    # the decision's own facts: both searches agree on the leadership page, and the T9 page
    # is in neither's best APART documents
    for mode in ("bm25", "vector"):
        found = ranked_documents(kb, SWITCH, APART, mode)
        assert "org/leadership.md" in found[:3] and "products/t9.md" not in found
    assert switched(kb, SWITCH, ("products/t9.md",))

    c = condenser.condense(history, SWITCH)
    assert c.kind == TurnKind.NEW_TOPIC
    assert c.question == SWITCH and c.searches == (SWITCH,) and c.prior == ()
    assert c.reason.startswith("searched: the question as typed (a new topic")

    follow = condenser.condense(history, "And how do I reset it?")
    assert follow.kind == TurnKind.FOLLOW_UP
    assert follow.queries == (f"And how do I reset it? {T9_QUESTION}", "And how do I reset it?")
    assert follow.prior == ("products/t9.md",)

    # off (the default: offline/follow_up.py's docstring) the switch is fused as before
    off = RetrievalCondenser(kb, ENGLISH_READING).condense(history, SWITCH)
    assert off.kind == TurnKind.FOLLOW_UP and off.queries[1] == SWITCH


def test_no_switch_without_the_conversations_documents_or_when_it_shares_one(kb):
    assert not switched(kb, SWITCH, ())
    # the question's own best document is the conversation's: it stays on the topic
    assert not switched(kb, SWITCH, ("org/leadership.md",))
