"""Several knowledge bases served at once: the catalog, the tools' `knowledge_base`, the
offline choice of KB, citations naming the KB, over real HTTP and a real MCP stdio client,
and a catalog of a SQLite folder beside a Postgres database."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import write_docs
from test_mcp import _params, _text
from test_server import LiveServer

from ragloop.agent.tools import FETCH, LIST, SEARCH, Toolbox, tool_specs
from ragloop.core.config import Settings
from ragloop.core.config_file import read_config_file
from ragloop.core.errors import ConfigError
from ragloop.core.events import SourceEvent
from ragloop.kb import KnowledgeBase
from ragloop.kb.catalog import (
    CatalogEntry,
    catalog_entries,
    describe,
    open_catalog,
    parse_kb_options,
    read_catalog,
)

HR_DOCS = {
    "policies/travel.md": """# Travel and Expense Policy

## 4 Approvals
### 4.2 Approval thresholds
Expenses above £2,500 per trip must be approved by the Chief Financial Officer.
Expenses up to £2,500 are approved by the line manager.
""",
    "org/leadership.md": """# Leadership

## Executive team
The Chief Financial Officer of Northwind Labs is Priya Raman, who joined in 2021.
""",
    # the same doc id in both knowledge bases, with different text
    "notes.md": "# Notes\n\n## Holidays\nStaff get 27 days of annual leave plus bank holidays.\n",
}
PRODUCT_DOCS = {
    "products/sensor.md": """# T9 Sensor Datasheet

## Environmental ratings
The T9 sensor carries an ingress protection rating of IP67: it survives immersion in one
metre of water for thirty minutes.

## Power
The T9 runs on a CR123A battery with a typical life of 5 years at one reading per minute.
""",
    "notes.md": "# Notes\n\n## Firmware\nThe T9 firmware is updated over the air every"
                " quarter.\n",
}
SENSOR_Q = "Is the T9 sensor waterproof, and what is its ingress protection rating?"


@pytest.fixture(scope="module")
def two_templates(tmp_path_factory):
    """Two real SQLite knowledge bases (MiniLM vectors), built once for the module."""
    root = tmp_path_factory.mktemp("multi")
    out = {}
    for name, docs, line in (("hr", HR_DOCS, "HR policies and the leadership team"),
                             ("products", PRODUCT_DOCS, None)):
        with KnowledgeBase.open(root / name) as kb:
            kb.ingest([write_docs(root / f"{name}-docs", docs)])
            describe(kb, line)  # products: drafted from its titles
        out[name] = root / name
    return out


@pytest.fixture
def folders(two_templates, tmp_path):
    out = {}
    for name, template in two_templates.items():
        shutil.copytree(template, tmp_path / name)
        out[name] = tmp_path / name
    return out


@pytest.fixture
def kbs(folders):
    opened = open_catalog([CatalogEntry(n, str(p)) for n, p in folders.items()],
                          Settings().with_(model="offline"))
    yield opened
    opened.close()


# -- the catalog ---------------------------------------------------------------------------


def test_kb_options_one_path_stays_the_old_way_and_names_make_a_catalog(tmp_path):
    assert parse_kb_options([]) is None
    assert parse_kb_options(["./kb"]) is None
    assert parse_kb_options(["postgresql://u@h/db?sslmode=disable"]) is None
    entries = parse_kb_options(["hr=./hr-kb", "docs=postgresql://u@h/db?sslmode=disable"])
    assert entries == [CatalogEntry("hr", "./hr-kb"),
                       CatalogEntry("docs", "postgresql://u@h/db?sslmode=disable")]
    # an existing folder whose name holds '=' is still one knowledge base
    odd = tmp_path / "a=b"
    odd.mkdir()
    assert parse_kb_options([str(odd)]) is None


@pytest.mark.parametrize("values, says", [
    (["hr=./a", "./b"], "each --kb is NAME=LOCATION"),
    (["1hr=./a", "b=./b"], "not a knowledge base name"),
    (["hr=", "b=./b"], "no location after hr="),
    (["hr=./a", "hr=./b"], "given twice"),
    (["my kb=./a"], "not a knowledge base name"),
])
def test_bad_kb_options_say_what_to_write(values, says):
    with pytest.raises(ConfigError, match=says):
        parse_kb_options(values)


def test_catalog_file_both_forms_relative_to_the_file_and_errors(tmp_path):
    path = tmp_path / "kbs.toml"
    path.write_text('[knowledge_bases]\nhr = "hr-kb"\n'
                    '[knowledge_bases.docs]\nlocation = "postgresql://u@h/db"\n'
                    'description = "Product   docs"\n', encoding="utf-8")
    assert read_catalog(path) == [CatalogEntry("hr", str(tmp_path / "hr-kb")),
                                  CatalogEntry("docs", "postgresql://u@h/db", "Product docs")]
    path.write_text('[knowledge_bases.hr]\nfolder = "x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="needs location"):
        read_catalog(path)
    path.write_text('RAGLOOP_MODEL = "offline"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no \[knowledge_bases\] table"):
        read_catalog(path)
    with pytest.raises(ConfigError, match="no such file"):
        read_catalog(tmp_path / "missing.toml")


def test_ragloop_toml_knowledge_bases_table(tmp_path, monkeypatch):
    (tmp_path / "ragloop.toml").write_text(
        'RAGLOOP_MODEL = "offline"\n[knowledge_bases]\na = "kb-a"\nb = "kb-b"\n',
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # the settings reader passes over the table; the catalog reads it
    assert read_config_file(tmp_path / "ragloop.toml") == {"RAGLOOP_MODEL": "offline"}
    assert [e.name for e in catalog_entries(None)] == ["a", "b"]
    # a --kb given wins over the file's table
    assert catalog_entries(["./other"]) is None


def test_descriptions_written_or_drafted_from_titles(kbs):
    described = kbs.descriptions()
    assert described["hr"] == "HR policies and the leadership team"
    assert "T9 Sensor Datasheet" in described["products"]
    assert kbs.names() == ["hr", "products"]


def test_a_missing_location_is_a_config_error_naming_the_kb(folders, tmp_path):
    with pytest.raises(ConfigError, match="'gone'"):
        open_catalog([CatalogEntry("hr", str(folders["hr"])),
                      CatalogEntry("gone", str(tmp_path / "nothing-here"))])


# -- the tools ------------------------------------------------------------------------------


def test_tool_schema_enumerates_the_knowledge_bases(kbs):
    specs = {s.name: s for s in Toolbox(kbs).specs}
    arg = specs[SEARCH].parameters["properties"]["knowledge_base"]
    assert arg["enum"] == ["hr", "products"]
    assert "hr: HR policies and the leadership team" in arg["description"]
    assert "products:" in arg["description"]
    assert specs[FETCH].parameters["properties"]["knowledge_base"]["enum"] == ["hr", "products"]
    assert "knowledge_base" not in specs[SEARCH].parameters.get("required", [])
    # one knowledge base: the schema is what it always was
    single = {s.name: s for s in tool_specs(8)}
    assert "knowledge_base" not in single[SEARCH].parameters["properties"]
    assert "knowledge_base" not in single[FETCH].parameters["properties"]


def test_unknown_knowledge_base_is_an_error_the_model_can_act_on(kbs):
    box = Toolbox(kbs)
    outcome = box.run_tool(SEARCH, {"query": "T9 battery", "knowledge_base": "finance"})
    assert outcome.is_error
    assert "unknown knowledge base 'finance'" in outcome.text
    assert "hr (HR policies" in outcome.text and "products" in outcome.text
    named = box.run_tool(SEARCH, {"query": "battery life", "knowledge_base": "hr"})
    assert not named.is_error and "[knowledge_base: hr]" in named.text
    assert "[knowledge_base: products]" not in named.text


def test_list_and_fetch_name_the_knowledge_base_and_collisions(kbs):
    box = Toolbox(kbs)
    listed = box.run_tool(LIST, {}).text
    assert "products/sensor.md" in listed and "[knowledge_base: products]" in listed
    assert listed.count("notes.md") == 2
    ambiguous = box.run_tool(FETCH, {"doc_id": "notes.md", "section": "1"})
    assert ambiguous.is_error and "several knowledge bases (hr, products)" in ambiguous.text
    fetched = box.run_tool(FETCH, {"doc_id": "notes.md", "section": "1",
                                   "knowledge_base": "products"})
    assert not fetched.is_error and "over the air" in fetched.text
    assert "annual leave" not in fetched.text
    only_one = box.run_tool(FETCH, {"doc_id": "policies/travel.md", "section": "4.2"})
    assert not only_one.is_error and "[knowledge_base: hr]" in only_one.text


def test_merged_hits_are_tagged_and_ids_do_not_collide(kbs):
    hits = kbs.search("notes", 10, knowledge_base=["hr", "products"])
    assert {h.kb for h in hits} == {"hr", "products"}
    assert len({h.chunk_id for h in hits}) == len(hits)
    # the chunks of a view's ids read back from the right knowledge base
    back = kbs.store.chunks([h.chunk_id for h in hits])
    assert {back[h.chunk_id].doc_id for h in hits} == {h.doc_id for h in hits}


# -- the offline choice, the run ------------------------------------------------------------


def test_offline_choice_picks_the_kb_whose_search_scores_best(kbs):
    from ragloop.offline.factory import source_chooser

    chooser = source_chooser(kbs)
    sensor = chooser.choose(SENSOR_Q)
    assert sensor.knowledge_bases == ("products",)
    assert "cosine" in sensor.reason and "products" in sensor.reason
    travel = chooser.choose("Who must approve travel expenses above £2,500?")
    assert travel.knowledge_bases == ("hr",)
    # no KB ahead by the margin: every KB within it is searched, and the reason says why
    from ragloop.offline.source_choice import NearestChunkChooser

    vague = NearestChunkChooser(kbs, margin=1.0).choose(SENSOR_Q)
    assert vague.knowledge_bases == ("products", "hr")  # best first: its hits win ties
    assert "within 1.00" in vague.reason


def test_parts_follow_the_whole_questions_kb_and_nothing_leaks_past_the_run(kbs):
    from ragloop.kb.multi import RunSources
    from ragloop.offline.factory import source_chooser

    kbs.chooser = source_chooser(kbs)  # what the engine sets
    run = RunSources()  # one run's: the engine hands the same one to the run's toolboxes
    box, loop_box = Toolbox(kbs, run=run), Toolbox(kbs, run=run)
    question = "Is the T9 sensor waterproof, and how long does its battery last?"
    parts = ["Is the T9 sensor waterproof?", "How long does its battery last?"]
    events = box.source_events(question, parts)
    assert run.knowledge_bases == ("products",)
    assert [e.part for e in events] == [None, 0, 1]
    assert all(e.knowledge_bases == ["products"] for e in events)
    assert events[2].reason == "the whole question's knowledge base"
    # a search of this run naming no KB goes where the run was placed, from either toolbox
    assert {h.kb for h in loop_box.search("annual leave holidays")} == {"products"}
    # another run's toolbox, and a search outside a run, choose per query
    assert {h.kb for h in Toolbox(kbs, k=3).search("Chief Financial Officer approves travel")
            } == {"hr"}
    assert {h.kb for h in kbs.search("Chief Financial Officer approves travel", 3)} == {"hr"}


def test_a_run_chooses_the_source_of_each_query_once(kbs):
    """The offline choice runs a vector search per KB: a run makes it once per question
    (the part chosen for its source step is not chosen again when it is searched)."""
    from collections import Counter

    from ragloop.agent.engine import Engine
    from ragloop.offline.factory import source_chooser

    class Counting:
        def __init__(self, inner) -> None:
            self.inner, self.asked = inner, Counter()

        def choose(self, query):
            self.asked[query] += 1
            return self.inner.choose(query)

    kbs.chooser = counting = Counting(source_chooser(kbs))
    events = []
    Engine(kbs, kbs.settings.with_(model="offline")).ask(
        "Is the T9 sensor waterproof, and who must approve travel expenses above £2,500?",
        on_event=events.append)
    parts = [e for e in events if isinstance(e, SourceEvent) and e.part is not None]
    assert len(parts) == 2 and parts[0].knowledge_bases != parts[1].knowledge_bases, parts
    assert all(counting.asked[e.query] == 1 for e in parts), counting.asked
    assert max(counting.asked.values()) == 1, counting.asked


def test_a_run_shows_its_source_choice_and_cites_the_kb(kbs):
    from ragloop.agent.engine import Engine

    events = []
    result = Engine(kbs, kbs.settings.with_(model="offline")).ask(
        SENSOR_Q, on_event=events.append)
    sources = [e for e in events if isinstance(e, SourceEvent)]
    assert sources and sources[0].knowledge_bases == ["products"] and sources[0].reason
    assert result.status == "answered", result.answer
    assert result.citations and all(c.kb == "products" for c in result.citations)
    assert all(c.to_dict()["kb"] == "products" for c in result.citations)
    assert all(e["kb"] == "products" for e in result.evidence)
    # the stored run keeps the source step (the run store reads the new event back)
    stored = kbs.backend.runs.events(result.run_id)
    assert any(isinstance(e, SourceEvent) and e.knowledge_bases == ["products"]
               for e in stored)


def test_ragloop_ask_with_two_kbs_prints_the_source_step_and_the_kb(folders):
    import subprocess

    env_kb = [f"--kb=hr={folders['hr']}", f"--kb=products={folders['products']}"]
    done = subprocess.run([sys.executable, "-m", "ragloop", "ask", SENSOR_Q, *env_kb,
                           "--model", "offline"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "source question knowledge_bases=products" in done.stderr
    assert "(products)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "ragloop", "ask", "x", "--kb", "hr=",
                          "--kb", "b=./b"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no location after hr=" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "ragloop", "serve", env_kb[0],
                              "--kb", f"gone={folders['hr']}-not-here", "--port", "9"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "knowledge base 'gone'" in missing.stderr


def test_ragloop_search_with_two_kbs_names_each_hits_kb(folders):
    import subprocess

    kbs = [f"--kb=hr={folders['hr']}", f"--kb=products={folders['products']}"]
    done = subprocess.run([sys.executable, "-m", "ragloop", "search", "notes", "-k", "6", *kbs,
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    # both KBs hold a notes.md: each hit says which one it came from
    assert {h["kb"] for h in hits} == {"hr", "products"}
    shown = subprocess.run([sys.executable, "-m", "ragloop", "search", "annual leave", *kbs],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "(hr)" in shown.stdout


# -- serve, mcp ------------------------------------------------------------------------------


def test_serve_two_kbs_over_http(folders):
    from ragloop.apps.server.app import create_app

    entries = [CatalogEntry(n, str(p)) for n, p in folders.items()]
    settings = Settings().with_(model="offline", kb=entries[0].location)
    with LiveServer(create_app(settings, catalog=entries)) as live, live.client() as client:
        listed = client.get("/knowledge_bases").json()["knowledge_bases"]
        assert [k["name"] for k in listed] == ["hr", "products"]
        assert listed[0]["description"] == "HR policies and the leadership team"
        found = client.get("/search", params={"q": "battery", "knowledge_base": "products"})
        assert found.status_code == 200
        assert {h["kb"] for h in found.json()["hits"]} == {"products"}
        unknown = client.get("/search", params={"q": "battery", "knowledge_base": "nope"})
        assert unknown.status_code == 400 and "unknown knowledge base" in unknown.text
        docs = client.get("/documents").json()["documents"]
        assert {(d["kb"], d["doc_id"]) for d in docs} >= {("hr", "notes.md"),
                                                          ("products", "notes.md")}
        section = client.get("/documents/notes.md/sections/1",
                             params={"knowledge_base": "hr"})
        assert section.status_code == 200 and "annual leave" in section.json()["text"]
        answered = client.post("/ask", json={"question": SENSOR_Q})
        assert answered.status_code == 200, answered.text
        body = answered.json()
        assert body["citations"] and {c["kb"] for c in body["citations"]} == {"products"}
        upload = client.post("/documents", files={"files": ("a.md", b"# A\n\ntext\n")})
        assert upload.status_code == 400 and "knowledge_base=NAME" in upload.text
        # an OpenAI client sees each KB as a model, and naming one searches only it
        models = [m["id"] for m in client.get("/v1/models").json()["data"]]
        assert models == ["ragloop", "hr", "products"]
        for model, kb in (("hr", "hr"), ("products", "products")):
            reply = client.post("/v1/chat/completions", json={
                "model": model, "messages": [{"role": "user", "content": SENSOR_Q}]})
            assert reply.status_code == 200, reply.text
            cited = reply.json()["choices"][0]["message"]["citations"]
            assert {c["kb"] for c in cited} <= {kb}
            run_id = reply.json()["id"].removeprefix("chatcmpl-")
            steps = [json.loads(line[5:]) for line in
                     client.get(f"/runs/{run_id}/events").text.splitlines()
                     if line.startswith("data:")]
            sources = [e for e in steps if e.get("kind") == "source"]
            assert sources and all(e["data"]["knowledge_bases"] == [kb] for e in sources), steps


def test_chat_completions_sources_name_the_cited_kbs_section(folders):
    """A doc id in both KBs: the source line and title are read from the KB the citation
    names (read without it, the section is ambiguous and the title was lost)."""
    from ragloop.apps.server.app import create_app

    entries = [CatalogEntry(n, str(p)) for n, p in folders.items()]
    settings = Settings().with_(model="offline", kb=entries[0].location)
    with LiveServer(create_app(settings, catalog=entries)) as live, live.client() as client:
        for model, question, title in (
                ("products", "How often is the T9 firmware updated?", "Notes › Firmware"),
                ("hr", "How many days of annual leave do staff get?", "Notes › Holidays")):
            reply = client.post("/v1/chat/completions", json={
                "model": model, "messages": [{"role": "user", "content": question}]})
            assert reply.status_code == 200, reply.text
            message = reply.json()["choices"][0]["message"]
            cited = [c for c in message["citations"] if c["doc_id"] == "notes.md"]
            assert cited and all(c["kb"] == model for c in cited), message
            assert all(c["title"] == title for c in cited), cited
            assert f"{title} — notes.md §" in message["content"], message["content"]


async def _mcp_session(folders):
    from mcp import Client

    args = ["ragloop.apps.mcp_server", "--kb", f"hr={folders['hr']}",
            "--kb", f"products={folders['products']}"]
    async with Client(_params(*args)) as client:
        tools = (await client.list_tools()).tools
        named = await client.call_tool(SEARCH, {"query": "battery life",
                                                "knowledge_base": "products"})
        unknown = await client.call_tool(SEARCH, {"query": "battery",
                                                  "knowledge_base": "finance"})
        fetched = await client.call_tool(FETCH, {"doc_id": "notes.md", "section": "1",
                                                 "knowledge_base": "hr"})
        answer = await client.call_tool("ask", {"question": SENSOR_Q})
        listed = await client.call_tool(LIST, {})
        ambiguous = await client.call_tool(FETCH, {"doc_id": "notes.md", "section": "1"})
        return tools, named, unknown, fetched, answer, listed, ambiguous


def test_mcp_two_kbs_over_stdio(folders):
    tools, named, unknown, fetched, answer, listed, ambiguous = asyncio.run(
        asyncio.wait_for(_mcp_session(folders), 300))
    # list_documents names each document's KB; fetching a doc id two KBs hold asks for one
    text = _text(listed)
    assert re.search(r"- notes\.md: Notes \(.*\) \[knowledge_base: hr\]", text), text
    assert "[knowledge_base: products]" in text
    assert ambiguous.is_error and "several knowledge bases (hr, products)" in _text(ambiguous)
    by_name = {t.name: t for t in tools}
    arg = by_name[SEARCH].input_schema["properties"]["knowledge_base"]
    assert arg["enum"] == ["hr", "products"] and "HR policies" in arg["description"]
    assert not named.is_error and "[knowledge_base: products]" in _text(named)
    assert unknown.is_error and "unknown knowledge base 'finance'" in _text(unknown)
    assert not fetched.is_error and "annual leave" in _text(fetched)
    assert not answer.is_error and "(products)" in _text(answer)


# -- writing to one of several: uploads, folder sync, reading by name ------------------------


def _upload(client, name, data, **params):
    return client.post("/documents", params=params.pop("query", {}), data=params,
                       files=[("files", (name, data, "application/octet-stream"))])


def _uploaded(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "uploads").iterdir()) \
        if (folder / "uploads").exists() else []


def test_an_upload_names_its_kb_and_documents_are_read_and_deleted_by_kb(folders):
    from ragloop.apps.server.app import create_app

    entries = [CatalogEntry(n, str(p)) for n, p in folders.items()]
    settings = Settings().with_(model="offline", kb=entries[0].location)
    pump = b"# Pump\n\n## Seals\nThe P4 pump's seals are replaced every 2,000 hours.\n"
    with LiveServer(create_app(settings, catalog=entries)) as live, live.client() as client:
        # none named, or an unknown name: 400 listing the names, nothing written anywhere
        for params in ({}, {"knowledge_base": "finance"}, {"query": {"knowledge_base": "x"}}):
            refused = _upload(client, "pump.md", pump, **params)
            assert refused.status_code == 400, refused.text
            message = refused.json()["message"]
            assert "hr (HR policies and the leadership team)" in message, message
            assert "products" in message
        assert _uploaded(folders["hr"]) == _uploaded(folders["products"]) == []
        both = _upload(client, "pump.md", pump, knowledge_base="hr",
                       query={"knowledge_base": "products"})
        assert both.status_code == 400 and "give one" in both.text

        # a form field names it; a query parameter as well
        added = _upload(client, "pump.md", pump, knowledge_base="products")
        assert added.status_code == 200, added.text
        assert added.json()["kb"] == "products" and added.json()["added"] == 1
        again = _upload(client, "pump.md", pump + b"Seal kits are part SK-4.\n",
                        query={"knowledge_base": "hr"})
        assert again.status_code == 200 and again.json()["kb"] == "hr"
        assert _uploaded(folders["products"]) == _uploaded(folders["hr"]) == ["pump.md"]
        docs = {(d["kb"], d["doc_id"]) for d in client.get("/documents").json()["documents"]}
        assert {("hr", "pump.md"), ("products", "pump.md")} <= docs
        found = client.get("/search", params={"q": "P4 pump seals", "k": 3,
                                              "knowledge_base": "products"}).json()["hits"]
        assert found[0]["doc_id"] == "pump.md" and found[0]["kb"] == "products"

        # a document by id: in two KBs it needs the name; named, it is that KB's
        ambiguous = client.get("/documents/notes.md")
        assert ambiguous.status_code == 404 and "(hr, products)" in ambiguous.text
        one = client.get("/documents/notes.md", params={"knowledge_base": "products"}).json()
        assert one["kb"] == "products"
        assert [s["title"] for s in one["section_list"]][-1] == "Firmware"
        assert client.get("/documents/policies/travel.md").json()["kb"] == "hr"
        unknown = client.get("/documents/notes.md", params={"knowledge_base": "finance"})
        assert unknown.status_code == 400 and "hr (" in unknown.text

        # DELETE takes the name the same way, and deletes from that KB only
        assert client.delete("/documents/pump.md").status_code == 400
        gone = client.delete("/documents/pump.md", params={"knowledge_base": "hr"})
        assert gone.status_code == 200, gone.text
        docs = {(d["kb"], d["doc_id"]) for d in client.get("/documents").json()["documents"]}
        assert ("products", "pump.md") in docs and ("hr", "pump.md") not in docs


def test_one_kb_served_alone_is_named_by_its_folder_and_refuses_another_name(folders):
    from ragloop.apps.server.app import create_app

    settings = Settings().with_(model="offline", kb=str(folders["hr"]))
    with LiveServer(create_app(settings)) as live, live.client() as client:
        # the listing names it (its folder's name), not ""
        listed = client.get("/knowledge_bases").json()["knowledge_bases"]
        assert [k["name"] for k in listed] == ["hr"]
        assert listed[0]["documents"] == len(_doc_ids(folders["hr"]))
        named = _upload(client, "a.md", b"# A\n\nSome text.\n", knowledge_base="finance")
        assert named.status_code == 400 and "One knowledge base is served, 'hr'" in named.text
        plain = _upload(client, "a.md", b"# A\n\nSome text.\n")
        assert plain.status_code == 200 and "kb" not in plain.json()
        own = _upload(client, "b.md", b"# B\n\nMore text.\n", knowledge_base="hr")
        assert own.status_code == 200, own.text
        assert _uploaded(folders["hr"]) == ["a.md", "b.md"]


def test_own_name_of_a_postgres_url_is_its_database_not_the_url() -> None:
    from ragloop.kb.multi import own_name

    class Url:
        settings = Settings().with_(kb="postgresql://u:secret@h:5432/manuals?sslmode=disable")

    assert own_name(Url()) == "manuals"


def test_the_server_syncs_each_kb_with_its_own_folder(folders, tmp_path):
    import time

    from ragloop.apps.server.app import create_app

    shares = {name: write_docs(tmp_path / f"{name}-share", {f"{name}-memo.md": text})
              for name, text in (("hr", "# Memo\n\nThe office closes on 24 December.\n"),
                                 ("products", "# Memo\n\nThe T10 ships in March.\n"))}
    entries = [CatalogEntry(n, str(p)) for n, p in folders.items()]
    settings = Settings().with_(model="offline", kb=entries[0].location)
    app = create_app(settings, catalog=entries, sync_every=0.2,
                     sync_folders=[f"{n}={p}" for n, p in shares.items()])
    with LiveServer(app) as live, live.client() as client:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            docs = {(d["kb"], d["doc_id"]) for d in client.get("/documents").json()["documents"]}
            if {("hr", "hr-memo.md"), ("products", "products-memo.md")} <= docs:
                break
            time.sleep(0.2)
        assert ("hr", "hr-memo.md") in docs and ("products", "products-memo.md") in docs
        assert ("hr", "products-memo.md") not in docs and ("products", "hr-memo.md") not in docs


@pytest.mark.parametrize(("values", "says"), [
    (["./share"], "no NAME="),
    (["finance=./share"], "'finance' is not a knowledge base served"),
    (["hr="], "no folder after hr="),
])
def test_sync_with_several_kbs_names_a_kb_or_says_which_there_are(values, says):
    from ragloop.apps.server.folder_sync import SyncTarget, sync_targets

    with pytest.raises(ConfigError, match=re.escape(says)) as raised:
        sync_targets(values, ["hr", "products"])
    if says != "no folder after hr=":
        assert "NAME one of: hr, products" in str(raised.value)
    # one KB served alone: folders as they are; a catalog of one: NAME= optional
    assert sync_targets(["a=b", "./c"], None) == [SyncTarget("a=b"), SyncTarget("./c")]
    assert sync_targets(["./c", "hr=./d"], ["hr"]) == [SyncTarget("./c", "hr"),
                                                      SyncTarget("./d", "hr")]


def _ragloop(*args: str):
    import subprocess

    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300)


def test_docs_and_section_commands_read_several_kbs(folders):
    kbs = [f"--kb=hr={folders['hr']}", f"--kb=products={folders['products']}"]
    listed = _ragloop("docs", *kbs, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {(d["kb"], d["doc_id"]) for d in json.loads(listed.stdout)} == {
        ("hr", "policies/travel.md"), ("hr", "org/leadership.md"), ("hr", "notes.md"),
        ("products", "products/sensor.md"), ("products", "notes.md")}
    table = _ragloop("docs", *kbs)
    assert table.returncode == 0, table.stderr
    # piped: TSV with the kb column first, the summary on stderr
    rows = [line.split("\t") for line in table.stdout.splitlines()]
    assert rows[0][:2] == ["kb", "doc_id"]
    assert ["products", "notes.md"] in [r[:2] for r in rows], table.stdout
    assert "5 documents" in table.stderr and "in 2 knowledge bases" in table.stderr

    read = _ragloop("section", "notes.md", "1", *kbs, "--in", "products")
    assert read.returncode == 0, read.stderr
    assert "(products)" in read.stdout and "over the air" in read.stdout
    unique = _ragloop("section", "products/sensor.md", "1", *kbs, "--json")
    assert unique.returncode == 0 and json.loads(unique.stdout)["kb"] == "products"
    ambiguous = _ragloop("section", "notes.md", "1", *kbs)
    assert ambiguous.returncode == 2 and "--in hr or --in products" in ambiguous.stderr
    unknown = _ragloop("section", "notes.md", "1", *kbs, "--in", "finance")
    assert unknown.returncode == 2 and "the knowledge bases are: hr (" in unknown.stderr
    # the serve command refuses a --sync naming no KB before it listens
    bad = _ragloop("serve", *kbs, "--sync", str(folders["hr"]), "--port", "9")
    assert bad.returncode == 2 and "NAME one of: hr, products" in bad.stderr


def _doc_ids(folder: Path) -> set[str]:
    with KnowledgeBase.open(folder) as kb:
        return {d.doc_id for d in kb.documents()}


def test_rm_command_deletes_from_the_kb_holding_the_document(folders, tmp_path):
    kbs = [f"--kb=hr={folders['hr']}", f"--kb=products={folders['products']}"]
    before = {name: _doc_ids(folder) for name, folder in folders.items()}
    ambiguous = _ragloop("rm", "notes.md", *kbs)
    assert ambiguous.returncode == 2 and "--in hr or --in products" in ambiguous.stderr
    unknown = _ragloop("rm", "notes.md", *kbs, "--in", "finance")
    assert unknown.returncode == 2 and "the knowledge bases are: hr (" in unknown.stderr
    missing = _ragloop("rm", "nope.md", *kbs)
    assert missing.returncode == 2 and "No document 'nope.md'" in missing.stderr
    not_there = _ragloop("rm", "products/sensor.md", *kbs, "--in", "hr")
    assert not_there.returncode == 2 and "'products/sensor.md' in hr" in not_there.stderr
    assert {name: _doc_ids(folder) for name, folder in folders.items()} == before

    # named, from that KB only; a doc id in one KB needs no name; a catalog file as well
    named = _ragloop("rm", "notes.md", *kbs, "--in", "products")
    assert named.returncode == 0, named.stderr
    assert _doc_ids(folders["products"]) == before["products"] - {"notes.md"}
    assert _doc_ids(folders["hr"]) == before["hr"]
    catalog = tmp_path / "kbs.toml"
    catalog.write_text(f"[knowledge_bases]\nhr = {json.dumps(str(folders['hr']))}\n"
                       f"products = {json.dumps(str(folders['products']))}\n")
    unique = _ragloop("rm", "policies/travel.md", "--catalog", str(catalog))
    assert unique.returncode == 0, unique.stderr
    assert _doc_ids(folders["hr"]) == before["hr"] - {"policies/travel.md"}

    # one KB by path: as before, and another name given to it is refused (the user meant
    # another KB); its own name (its folder's) is that KB
    alone = ["--kb", str(folders["hr"])]
    refused = _ragloop("rm", "notes.md", *alone, "--in", "finance")
    assert refused.returncode == 2 and "One knowledge base is served, 'hr'" in refused.stderr
    assert _ragloop("rm", "notes.md", *alone).returncode == 0
    assert _doc_ids(folders["hr"]) == {"org/leadership.md"}


# -- SQLite and Postgres in one catalog -------------------------------------------------------


def test_a_catalog_of_a_folder_and_a_postgres_database(folders, pg_small_url):
    kbs = open_catalog([CatalogEntry("hr", str(folders["hr"])),
                        CatalogEntry("small", pg_small_url)], Settings().with_(model="offline"))
    try:
        assert kbs.names() == ["hr", "small"]
        docs = {(d.kb, d.doc_id) for d in kbs.documents()}
        assert ("small", "products/sensor.md") in docs and ("hr", "notes.md") in docs
        hits = kbs.search("IP67 immersion water", 5, knowledge_base="small")
        assert hits and hits[0].kb == "small" and hits[0].doc_id == "products/sensor.md"
        both = kbs.search("Chief Financial Officer approval", 8,
                          knowledge_base=["hr", "small"])
        assert {h.kb for h in both} == {"hr", "small"}
    finally:
        kbs.close()


def test_one_kb_by_path_is_unchanged(two_templates, tmp_path):
    folder = Path(shutil.copytree(two_templates["hr"], tmp_path / "one"))
    with KnowledgeBase.open(folder) as kb:
        hits = kb.search("travel approval", 3)
        assert hits and all(h.kb == "" for h in hits)
        assert "kb" not in hits[0].to_dict()


def test_eval_over_two_kbs(folders, tmp_path):
    import json
    import subprocess

    questions = tmp_path / "qs.jsonl"
    questions.write_text(
        json.dumps({"id": "a", "q": SENSOR_Q, "gold_doc": "products/sensor.md"}) + "\n"
        + json.dumps({"id": "b", "q": "Who must approve travel expenses above £2,500?",
                      "gold_doc": "policies/travel.md"}) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "ragloop", "eval", str(questions), "--paths", "single",
         "-k", "3", "--kb", f"hr={folders['hr']}", "--kb", f"products={folders['products']}",
         "--model", "offline", "--out", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in
               (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2
    assert all(r["status"] == "answered" for r in records), records
    report = json.loads(done.stdout)
    assert "single" in json.dumps(report)
