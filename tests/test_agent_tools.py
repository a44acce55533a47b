"""The agent's tools as typed definitions: schemas and descriptions from argument models and
docstrings, one registry by name, argument errors said the way the model can fix them."""

from __future__ import annotations

import pytest

from ragloop.agent.tools import (
    FETCH,
    LIST,
    MAX_QUERY_CHARS,
    SEARCH,
    SEARCH_TOOL,
    TOOLS,
    FetchArgs,
    SearchArgs,
    Toolbox,
    tool_specs,
)
from ragloop.core.errors import ToolError


def test_schemas_and_descriptions_come_from_the_argument_models_and_docstrings() -> None:
    specs = {s.name: s for s in tool_specs(4)}
    assert list(specs) == list(TOOLS) == [SEARCH, FETCH, LIST]
    search = specs[SEARCH].parameters
    # the bounds a grammar-constrained small model needs, and no pydantic titles or defaults
    assert search["properties"]["query"] == {
        "type": "string", "maxLength": MAX_QUERY_CHARS,
        "description": SearchArgs.model_fields["query"].description}
    assert search["properties"]["page"]["minimum"] == 1
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    assert "title" not in str(search) and "default" not in search["properties"]["page"]
    assert specs[FETCH].parameters["properties"]["section"]["maxLength"] == 40
    # every argument but the knowledge base (only offered when several are served)
    assert set(specs[FETCH].parameters["required"]) == set(FetchArgs.model_fields) - {
        "knowledge_base"}
    # the description is the tool function's docstring, with the page size filled in
    assert specs[SEARCH].description.startswith("Hybrid search (keywords + meaning)")
    assert "Returns up to 4 chunks" in specs[SEARCH].description
    assert "\n" not in specs[FETCH].description and "  " not in specs[FETCH].description
    assert "Do not use it" in specs[LIST].description


@pytest.mark.parametrize(("arguments", "message"), [
    ({}, "missing or empty argument 'query'"),
    ({"query": None}, "missing or empty argument 'query'"),
    ({"query": ["a", "b"]}, "missing or empty argument 'query'"),
    ({"query": "  "}, "missing or empty argument 'query'"),
    ({"query": "x", "page": "zero"}, "page must be an integer from 1 to 5, not 'zero'"),
    ({"query": "x", "page": 2.5}, "page must be an integer from 1 to 5, not 2.5"),
    ({"query": "x", "page": 6}, "page must be an integer from 1 to 5, not 6"),
])
def test_a_bad_argument_is_a_tool_error_the_model_can_act_on(arguments, message) -> None:
    with pytest.raises(ToolError) as caught:
        SEARCH_TOOL.parse(arguments)
    assert str(caught.value) == message


def test_arguments_are_read_leniently_where_they_were() -> None:
    # a number is its text, a numeric string a page, null the first page, extras ignored
    args = SEARCH_TOOL.parse({"query": 2025, "page": "2", "why": "extra"})
    assert (args.query, args.page) == ("2025", 2)
    assert SEARCH_TOOL.parse({"query": " T9 ", "page": None}).page == 1
    # a query longer than the schema's maxLength is still searched (the bound is for grammars)
    assert len(SEARCH_TOOL.parse({"query": "word " * 100}).query) > MAX_QUERY_CHARS


def test_the_toolbox_runs_a_tool_by_name_and_reports_errors_as_results(small_kb) -> None:
    box = Toolbox(small_kb, k=2)
    found = box.run_tool(SEARCH, {"query": "approval threshold", "page": 2})
    assert not found.is_error and found.event.page == 2 and found.event.chunks == 2
    listed = box.run_tool(LIST, {})
    assert listed.event.documents and "policies/travel.md" in listed.text
    unknown = box.run_tool("rm_rf", {})
    assert unknown.is_error and unknown.text.startswith("Tool error: unknown tool 'rm_rf'")
    missing = box.run_tool(FETCH, {"doc_id": "policies/travel.md", "section": "9.9"})
    assert missing.is_error and missing.event.tool == FETCH
