"""Markdown: the heading tree (markdown-it-py) becomes sections; bodies become plain text.

Inline markup is dropped (emphasis, link targets, images keep their alt text), lists keep
their bullets, code blocks and tables keep their text. YAML front matter is removed and its
`title:` is used as the document title when no heading gives one; its fields are the
document's metadata (what search filters match).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.text import read_text
from ragloop.ingest.readers.visibility import visible_html
from ragloop.ingest.sections import build_sections

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
# A heading's attribute list, "## Title { #anchor .class }" (Python-Markdown attr_list, as
# MkDocs sites write it; Pandoc and kramdown header attributes): markup, not title words.
_ATTRS = re.compile(r"\s*\{:?\s*[#.][^{}]*\}\s*$")
_FM_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_TAG = re.compile(r"<[^>]+>")


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _inline_text(token: Token) -> str:
    out: list[str] = []
    for child in token.children or []:
        kind = child.type
        if kind in ("text", "code_inline"):
            out.append(child.content)
        elif kind == "softbreak" or kind == "hardbreak":
            out.append("\n")
        elif kind == "image":
            out.append(child.content or "".join(c.content for c in child.children or []))
    return "".join(out)


def front_matter(text: str) -> dict[str, Any]:
    """The front matter's fields (YAML, read by PyYAML's safe loader), flat
    (ingest.metadata); {} when there is none or it is not a YAML mapping."""
    m = _FRONT_MATTER.match(text)
    if not m:
        return {}
    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError:  # front matter a YAML parser rejects: the title regex still reads it
        return {}
    return clean_metadata(data) if isinstance(data, dict) else {}


def split_front_matter(text: str) -> tuple[str, str]:
    """(front-matter title or "", text without the front matter)."""
    m = _FRONT_MATTER.match(text)
    if not m:
        return "", text
    t = _FM_TITLE.search(m.group(1))
    title = t.group(1).strip().strip("\"'") if t else ""
    return title, text[m.end():]


def markdown_blocks(text: str) -> tuple[str, list[tuple[int, str, str]]]:
    """(preamble, [(level, heading, body)]) of a markdown text, bodies as plain text."""
    tokens = _parser().parse(text)
    preamble: list[str] = []
    heads: list[tuple[int, str, list[str]]] = []
    blocks = preamble
    lists: list[list[int]] = []  # stack of [ordered?, next number]
    prefix = ""  # bullet waiting for the first block of a list item
    row: list[str] = []
    rows: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type
        if kind == "heading_open":
            level = int(tok.tag[1])
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            heading = _inline_text(inline) if inline is not None and inline.type == "inline" else ""
            heading = _ATTRS.sub("", heading)
            blocks = []
            heads.append((level, heading, blocks))
            i += 3
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = int(tok.attrGet("start") or 1) if kind == "ordered_list_open" else 0
            lists.append([1 if kind == "ordered_list_open" else 0, start])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            if lists:
                lists.pop()
        elif kind == "list_item_open":
            indent = "  " * (len(lists) - 1)
            if lists and lists[-1][0]:
                prefix = f"{indent}{lists[-1][1]}. "
                lists[-1][1] += 1
            else:
                prefix = f"{indent}- "
        elif kind == "inline":
            content = _inline_text(tok)
            if _in_table(tokens, i):
                row.append(" ".join(content.split()))
            elif content.strip():
                blocks.append(prefix + content if prefix else content)
                prefix = ""
        elif kind in ("fence", "code_block"):
            if tok.content.strip():
                blocks.append(prefix + tok.content.rstrip("\n"))
                prefix = ""
        elif kind == "html_block":
            # a raw HTML block shows as HTML: its hidden elements are not read
            stripped = _TAG.sub(" ", visible_html(tok.content)).strip()
            if stripped:
                blocks.append(stripped)
        elif kind == "table_open":
            rows = []
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close":
            if any(row):
                rows.append(" | ".join(row))
        elif kind == "table_close" and rows:
            blocks.append("\n".join(rows))
        i += 1
    body = {id(b): _join(b) for _, _, b in heads}
    return _join(preamble), [(lvl, h, body[id(b)]) for lvl, h, b in heads]


def _in_table(tokens: list[Token], i: int) -> bool:
    prev = tokens[i - 1].type if i else ""
    return prev in ("th_open", "td_open")


def _join(blocks: list[str]) -> str:
    """Blocks joined by blank lines, except consecutive list items (one per line)."""
    out: list[str] = []
    for block in blocks:
        if out and _is_item(block) and _is_item(out[-1]):
            out[-1] += "\n" + block
        else:
            out.append(block)
    return "\n\n".join(out)


_ITEM = re.compile(r"^\s*(?:-|\d+\.) ")


def _is_item(block: str) -> bool:
    return bool(_ITEM.match(block.rsplit("\n", 1)[-1])) or bool(_ITEM.match(block))


def parse_markdown(text: str, doc_id: str, source: str, fallback_title: str = "") -> ParsedDocument:
    metadata = front_matter(text)
    fm_title, text = split_front_matter(text)
    preamble, heads = markdown_blocks(text)
    title, sections = build_sections(heads, preamble, title=fm_title or fallback_title,
                                     text_title=fm_title)
    return ParsedDocument(doc_id=doc_id, title=title or fm_title or fallback_title, source=source,
                          sections=sections, mime="text/markdown", metadata=metadata)


@reader
class MarkdownReader:
    suffixes: tuple[str, ...] = (".md", ".markdown", ".mdown", ".mkd")
    mime = "text/markdown"

    def parse(self, text: str, path: Path, doc_id: str) -> list[ParsedDocument]:
        doc = parse_markdown(text, doc_id, str(path), fallback_title=Path(path).stem)
        if not doc.sections:
            raise ReaderError("no text (only headings or markup)")
        return [doc]

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        return self.parse(read_text(path), path, doc_id)
