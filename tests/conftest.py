# Makes `tests/` importable as a path root so tests can `from fakes.anthropic_server import ...`
# without a tests package and without editing pyproject's pytest settings.
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import shutil

import pytest

# the real model server (llama-cpp-python + SmolLM2-135M), started once per session when used
from model_server import llama_server  # noqa: F401

# the real-Postgres fixtures (one embedded server per session, a database per test)
from pg_server import pg_server, pg_small_template, pg_small_url, pg_url  # noqa: F401

SMALL_DOCS = {
    "policies/travel.md": """# Travel and Expense Policy

## 1 Scope
This policy applies to all employees of Northwind Labs who travel for work.

## 4 Approvals
### 4.1 Booking
Flights must be booked through the company travel portal at least 14 days ahead.

### 4.2 Approval thresholds
Expenses above £2,500 per trip must be approved by the Chief Financial Officer.
Expenses up to £2,500 are approved by the line manager. See section 4.1 for booking rules.
""",
    "products/sensor.md": """# T9 Sensor Datasheet

## Environmental ratings
The T9 sensor carries an ingress protection rating of IP67: it survives immersion in one
metre of water for thirty minutes.

## Power
The T9 runs on a CR123A battery with a typical life of 5 years at one reading per minute.
""",
    "org/leadership.md": """# Leadership

## Executive team
The Chief Financial Officer of Northwind Labs is Priya Raman, who joined in 2021.
The Chief Executive Officer is Tom Becker.
""",
}


def write_docs(root, docs=SMALL_DOCS):
    for rel, text in docs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def embedder():
    """One MiniLM for the session (each KnowledgeBase would load its own)."""
    from ragloop.embed.local import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path) -> str:
    """A knowledge base location on each backend: a folder, then a real Postgres database."""
    if request.param == "sqlite":
        return str(tmp_path / "kb")
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def small_kb_template(tmp_path_factory):
    """A real knowledge base (SQLite + indexes + MiniLM vectors) built once per session."""
    from ragloop.kb import KnowledgeBase

    root = tmp_path_factory.mktemp("small")
    docs = write_docs(root / "docs")
    with KnowledgeBase.open(root / "kb") as kb:
        kb.ingest([docs])
    return root / "kb"


@pytest.fixture
def small_kb(small_kb_template, tmp_path):
    """A private copy of the small knowledge base (tests may write runs or documents)."""
    from ragloop.kb import KnowledgeBase

    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    kb = KnowledgeBase.open(folder)
    yield kb
    kb.close()
