"""Asking back from what the search returned (issue 40.5, rule 3 of offline/clarify.py):
several pages among step 1's ranked hits that answer the question about equally well, none
dominating, the question naming none, ask back with their titles; one page that covers the
question better, one the search returns again and again, or a question naming a page's own
title word is answered. Unit tests on hits, then end to end on a real SQLite KB, with a
principal who may not read one of the pages."""

from __future__ import annotations

import shutil

import pytest
from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.core.types import Hit, RunStatus
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.clarify import clarify

EN = vocabulary("en")
DEPLOY = "How do I deploy my app?"


def hit(n: int, doc: str, title: str, score: float, text: str, kept: bool = False) -> Hit:
    return Hit(chunk_id=n, doc_id=doc, section="1", section_title="", text=text,
               doc_title=title, grade_score=score, verdict="relevant" if kept else None)


def ranked() -> list[Hit]:
    return [hit(1, "docker.md", "Docker Containers", 0.72,
                "Deploy your app in a container image.", True),
            hit(2, "docker.md", "Docker Containers", 0.60, "Build the image first."),
            hit(3, "cloud.md", "Cloud Hosting", 0.70, "Deploy the app with one command."),
            hit(4, "server.md", "Own Server", 0.66, "To deploy an app, run it behind a proxy."),
            hit(5, "travel.md", "Travel Policy", 0.20, "Approvals for trips.")]


def test_pages_that_answer_about_equally_well_ask_back_with_their_titles() -> None:
    hits = ranked()
    # the kept evidence is one page: only the ranked hits show the other readings
    assert clarify(DEPLOY, hits[:1], EN, ENGLISH_READING) is None
    c = clarify(DEPLOY, hits[:1], EN, ENGLISH_READING, hits)
    assert c is not None
    assert c.options == ("Docker Containers", "Cloud Hosting", "Own Server")
    assert c.evidence["Own Server"] == ("server.md",)
    assert "answer the question about equally well" in c.reason


def test_a_page_that_covers_the_question_better_is_the_answer() -> None:
    # only the Docker page holds "container image": the others cover half the question
    assert clarify("How do I deploy my app as a container image?", [], EN, ENGLISH_READING,
                   ranked()) is None
    # a page far weaker than the best is no reading
    weak = [ranked()[0], hit(3, "cloud.md", "Cloud Hosting", 0.4, "Deploy the app.")]
    assert clarify(DEPLOY, [], EN, ENGLISH_READING, weak) is None


def test_a_page_the_search_returns_again_and_again_dominates() -> None:
    many = [*ranked()[:3], *(hit(10 + i, "docker.md", "Docker Containers", 0.5,
                                 f"Deploy step {i} of the app.") for i in range(4))]
    assert clarify(DEPLOY, [], EN, ENGLISH_READING, many) is None


def test_a_title_word_only_one_page_has_chose_it() -> None:
    assert clarify("How do I deploy my app to the cloud?", [], EN, ENGLISH_READING,
                   ranked()) is None


def test_pages_of_one_title_are_one_reading() -> None:
    # paragraphs of one article (SQuAD's documents) are one page, not readings
    same = [hit(1, "a-1", "Normans", 0.7, "Deploy the app in Normandy."),
            hit(2, "a-2", "Normans", 0.7, "Deploy the app in Normandy too.")]
    assert clarify(DEPLOY, [], EN, ENGLISH_READING, same) is None


def test_the_same_in_italian() -> None:
    it = reading("it")
    hits = [hit(1, "d.md", "Contenitori Docker", 0.7,
                "Pubblicare l'applicazione in un'immagine."),
            hit(2, "c.md", "Servizio cloud", 0.68, "Pubblicare l'applicazione con un comando.")]
    c = clarify("Come si fa a pubblicare l'applicazione?", [], vocabulary("it"), it, hits)
    assert c is not None and c.options == ("Contenitori Docker", "Servizio cloud")


PAGES = {
    "deploy/docker.md": """# Docker Containers

## Deploy
To deploy your app, build a container image with the app and run the image anywhere.
""",
    "deploy/cloud.md": """# Cloud Hosting

## Deploy
To deploy your app, push the app to the hosting service with one command.
""",
    "deploy/server.md": """---
access: [ops]
---
# Own Server

## Deploy
To deploy your app on your own machine, install the app and run it behind a proxy.
""",
    "policies/travel.md": """# Travel Policy

## Approvals
Expenses above 2,500 per trip must be approved by the finance officer.
""",
}


@pytest.fixture(scope="module")
def pages_template(tmp_path_factory):
    from ragloop.kb import KnowledgeBase

    root = tmp_path_factory.mktemp("deploy")
    with KnowledgeBase.open(root / "kb") as kb:
        kb.ingest([write_docs(root / "docs", PAGES)])
    return root / "kb"


@pytest.fixture
def pages(pages_template, tmp_path):
    from ragloop.kb import KnowledgeBase

    shutil.copytree(pages_template, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    yield kb
    kb.close()


def test_a_run_asks_back_with_the_pages_the_asker_may_read(pages):
    from ragloop.core.access import Principal

    result = Engine(pages).ask(DEPLOY)  # no principal: the operator reads every page
    assert result.status == RunStatus.NEEDS_INPUT
    options = set(result.clarification["options"])
    assert {"Docker Containers", "Cloud Hosting", "Own Server"} <= options
    # a principal outside ops never sees the Own Server page, in the options or anywhere
    guest = Engine(pages, principal=Principal("guest", frozenset()))
    result = guest.ask(DEPLOY)
    assert result.status == RunStatus.NEEDS_INPUT
    assert "Own Server" not in result.clarification["options"]
    assert "server.md" not in str(result.clarification)
    # one page covers this question better: answered
    answered = Engine(pages).ask("How do I build a container image?")
    assert answered.status != RunStatus.NEEDS_INPUT
