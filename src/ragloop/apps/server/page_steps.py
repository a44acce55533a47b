"""A tool call's step line on the page, made here from the event's shown fields
(`ToolCallEvent.shown`, the same ones the log line and /v1 reasoning read) and sent in the
event's SSE payload as `shown`. The page (static/app.js) keeps no copy of the rule: it puts
each piece in as text, a <q>, a span of the piece's class, or a button opening a section.
"""

from __future__ import annotations

from typing import Any

from ragloop.agent.tools import FETCH, SEARCH
from ragloop.core.events import ToolCallEvent

Piece = dict[str, Any]


def _piece(text: object, as_: str | None = None, **more: Any) -> Piece:
    return {"text": str(text), **({"as": as_} if as_ else {}), **more}


def tool_pieces(event: ToolCallEvent) -> dict[str, Any]:
    """`{"tool": "search" | "fetch" | None, "pieces": [...]}`: what the step shows after its
    number and tool name. A piece is `{"text"}` (plain), `as` "quote", "counts", "muted" or
    "error" (a span of that class), or "section" (a button, with `doc_id` and `section`)."""
    shown = event.shown()
    said = {f.key: f.value for f in shown if f.role == "said"}
    extra = [f"{f.key} {f.value}" for f in shown if f.role == "extra"]
    error = said.get("error")
    tool: str | None = None
    pieces: list[Piece] = []
    if event.tool == SEARCH:
        tool = "search"
        pieces += [_piece(" "), _piece(said.get("query", ""), "quote")]
        if not error:
            pieces += [_piece(" "), _piece(f"kept {said.get('kept', '?')}/"
                                           f"{said.get('chunks', '?')} chunks", "counts")]
    elif event.tool == FETCH:
        tool = "fetch"
        doc_id, section = said.get("doc_id", ""), said.get("section", "")
        pieces += [_piece(" read "), _piece(f"{doc_id} §{section}", "section", doc_id=doc_id,
                                            section=section)]
        if not error and "chars" in said:
            pieces.append(_piece(f" ({said['chars']} chars)", "muted"))
    elif not error and "documents" in said:
        pieces.append(_piece(f" {said['documents']} documents"))
    if extra:
        pieces.append(_piece(f" ({', '.join(extra)})", "muted"))
    if error:
        pieces.append(_piece(f" error: {error}", "error"))
    return {"tool": tool, "pieces": pieces}
