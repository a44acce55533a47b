"""The one function that makes data safe to print on a terminal.

Titles, chunk text, file names, stored questions and answers come from documents and HTTP
clients. Rich escapes its own markup but passes control characters through, so an ESC in a
title would reach the terminal raw: `ESC ] 52` writes the clipboard, `ESC ] 0` the window title,
`ESC [ 2J` clears the screen, `ESC [ 8m` hides the text after it. Every control character (C0
but tab and newline, DEL, C1) and the bidirectional overrides that reorder what a line shows
are printed as a visible escape (`\\x1b`, `\\u202e`) instead.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# the same set minus C0 (which JSON escapes itself): what json.dumps leaves raw
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: object) -> str:
    """`value` as text with every control character shown as an escape; newlines and tabs
    stay (a section's text needs them), a Windows line end becomes a newline."""
    return _CONTROL.sub(_escaped, str(value).replace("\r\n", "\n"))


def shown(value: object) -> str:
    """`value` ready to go inside Rich markup: controls made visible, markup escaped."""
    return escape(visible(value))


def one_line(value: object) -> str:
    """`visible(value)` with newlines and tabs escaped too (`\\n`, `\\t`): a table cell whose
    value (a file name may hold a newline) cannot split its row or fake another."""
    text = str(value).replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    # the line and paragraph separators: str.splitlines and some viewers break lines there
    return visible(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def tsv_field(value: object) -> str:
    """One field of a TSV line, escaped as PostgreSQL's COPY text format does (backslash,
    tab, newline, carriage return as `\\\\`, `\\t`, `\\n`, `\\r`) so a field never holds
    the separator or a line end, and the other controls made visible."""
    return one_line(str(value).replace("\\", "\\\\"))


def json_visible(text: str) -> str:
    """JSON text with DEL, C1 and bidi controls written as `\\u` escapes (still the same JSON:
    these characters only occur inside strings)."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
