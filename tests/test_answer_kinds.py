"""The kind of thing asked, read from the question's form, picks and shapes the answer (issue 41):
a yes/no question is answered yes or no, a "What is X?" question leads with the sentence that
defines X, a "Which <thing> …?" question with the sentence naming a value the question lacks."""

from __future__ import annotations

from ragloop.core.decisions import Evidence
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.offline.answer_choice import asked_kind, defines, definition_form, polarity
from ragloop.offline.answerer import ExtractiveAnswerer


def _section(n: int, title: str, text: str, doc: str = "guide.md") -> Evidence:
    return Evidence(n, doc, str(n), title, text, 1, 0)


def test_a_yes_no_question_is_answered_no_when_the_sentence_says_not(embedder) -> None:
    evidence = [_section(1, "Additional status codes", (
        "You can return additional status codes by returning a response directly. "
        "If you return additional status codes directly, they won't be included in the "
        "OpenAPI schema, because FastAPI cannot know beforehand what you return."))]
    draft = ExtractiveAnswerer(embedder, reading=ENGLISH_READING).answer(
        "Do additional status codes returned directly appear in the OpenAPI schema?", [],
        evidence)
    assert draft.text.startswith("No: If you return additional status codes directly"), \
        draft.text


def test_a_yes_no_question_is_answered_yes_when_the_sentence_agrees(embedder) -> None:
    evidence = [_section(1, "Classes as dependencies", (
        "A Python class is also a callable. So a Python class can be used as a dependency."))]
    draft = ExtractiveAnswerer(embedder, reading=ENGLISH_READING).answer(
        "Can a Python class be used as a dependency?", [], evidence)
    assert draft.text.startswith("Yes: "), draft.text


def test_a_question_offering_alternatives_is_not_answered_yes_or_no() -> None:
    assert asked_kind("Was Pepper Keenan or Rob Parissi born first?", ENGLISH_READING) is None
    assert asked_kind("Was Pepper Keenan born first?", ENGLISH_READING) == "yes_no"


def test_polarity_reads_each_language_and_a_negative_question() -> None:
    assert polarity("It will not work.", "Does it work?", ENGLISH_READING) == "No"
    assert polarity("It won't work.", "Does it work?", ENGLISH_READING) == "No"
    assert polarity("It will not work.", "Doesn't it work?", ENGLISH_READING) == "Yes"
    assert polarity("Funziona bene.", "Funziona?", reading("it")) == "Sì"
    assert polarity("Non funziona.", "Funziona?", reading("it")) == "No"
    assert polarity("这个方法不能用。", "这个方法能用吗？", reading("zh")) == "不"


def test_a_what_is_question_leads_with_the_sentence_defining_its_subject(embedder) -> None:
    # every sentence is about middlewares; the one of the form "a middleware is …" defines it
    evidence = [_section(1, "Middleware", (
        "You can add middleware to FastAPI applications. "
        "The last middleware added is the outermost, and the first is the innermost. "
        "A middleware is a function that works with every request before it is processed by "
        "any specific path operation."))]
    draft = ExtractiveAnswerer(embedder, reading=ENGLISH_READING).answer(
        "What is a middleware?", [], evidence)
    assert draft.text.startswith("A middleware is a function"), draft.text


def test_the_definition_form_needs_the_subject_just_before_the_predicate() -> None:
    form = definition_form("What does Dependency Injection mean?", ENGLISH_READING)
    assert form is not None
    en = ENGLISH_READING
    assert defines('"Dependency Injection" means, in programming, that …', form, en)
    assert not defines("With Dependency Injection, the code means less repetition.", form, en)
    mw = definition_form("What is a middleware?", en)
    assert mw is not None and not defines("The last middleware added is the outermost.", mw, en)
    api = definition_form("What is OpenAPI?", en)
    assert api is not None and defines("In this case, OpenAPI is a specification.", api, en)
    assert definition_form("How do I send form data with the test client?",
                           ENGLISH_READING) is None


def test_a_which_thing_question_leads_with_the_sentence_naming_a_value(embedder) -> None:
    # FastAPI, named all through the evidence, is not the value asked for; Jinja2 is
    evidence = [_section(1, "Templates", (
        "You can use any template engine you want with FastAPI. "
        "A common choice is Jinja2, the same one used by Flask and other tools.")),
        _section(2, "Install", "FastAPI installs with one command. FastAPI runs anywhere."),
        _section(3, "Static files", "FastAPI can serve static files from a directory.")]
    draft = ExtractiveAnswerer(embedder, reading=ENGLISH_READING).answer(
        "Which template engine is the common choice?", [], evidence)
    assert asked_kind("Which template engine is the common choice?", ENGLISH_READING) == "value"
    assert draft.text.startswith("A common choice is Jinja2"), draft.text
