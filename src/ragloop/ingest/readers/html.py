"""HTML (selectolax/lexbor): page chrome stripped, h1–h6 become sections.

Removed before reading: script, style, nav, header, footer, aside, noscript, svg, form (and
template, iframe, button); with RAGLOOP_HIDDEN_TEXT=drop (the default) also what a reader of
the page cannot see (readers/visibility.py: `hidden`, display:none, white on white, ...). An
image's alt text is kept as "[image: alt]". The title is the <title> text, else the first h1.
"""

from __future__ import annotations

import re
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.text import read_text
from ragloop.ingest.readers.visibility import drop_hidden, hidden_html
from ragloop.ingest.sections import build_sections, clean_heading

STRIP_TAGS = ["script", "style", "nav", "header", "footer", "aside", "noscript", "svg", "form",
              "template", "iframe", "button", "select", "canvas", "object"]
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that end a line of text (and start a new one).
BLOCK_TAGS = {"p", "div", "section", "article", "main", "blockquote", "pre", "table", "tr",
              "ul", "ol", "dl", "dt", "dd", "li", "br", "hr", "figure", "figcaption",
              "address", "details", "summary", "caption", "thead", "tbody", "tfoot", "body",
              "center", "fieldset", "legend", *HEADINGS}
CELL_TAGS = {"td", "th"}
# Elements nested deeper than this are flattened before parsing (see bound_nesting).
MAX_DEPTH = 256
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)[^>]*>")
_NOT_NESTING = {"p", "li", "dt", "dd", "td", "th", "tr", "option", "optgroup", "rb", "rt",
                "rp", "colgroup", "thead", "tbody", "tfoot", "caption", "area", "base", "br",
                "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
                "param", "html", "head", "body"}
_KEEP = "\ue000"  # a space inside <pre> that line stripping must not remove
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


def image_text(alt: str) -> str:
    """An image's alt text as it is indexed: marked, so that it reads as a description of a
    picture and not as the page's own words."""
    return f"[image: {' '.join(alt.split())}]"


def _text(node: LexborNode) -> str:
    return clean_heading(node.text(deep=True, separator=" "))


def bound_nesting(html: str, max_depth: int = MAX_DEPTH) -> str:
    """`html` with the tags nested deeper than `max_depth` removed (their text kept).

    The parser checks the stack of open elements at each tag, so 100,000 nested <div>s
    take minutes; no real page nests that deep. Tags the parser closes by itself (<p>, <li>,
    ...) and void ones are not counted, so long pages that never close them are untouched.
    """
    depth = deepest = 0
    tags = []
    for m in _TAG.finditer(html):
        name = m.group(2).lower()
        if name in _NOT_NESTING or m.group(0).endswith("/>"):
            continue
        depth = max(depth - 1, 0) if m.group(1) else depth + 1
        deepest = max(deepest, depth)
        tags.append((m, depth))
    if deepest <= max_depth:
        return html
    out, last, depth = [], 0, 0
    for m, _ in tags:
        closing = bool(m.group(1))
        if not closing:
            depth += 1
        if depth > max_depth:
            out.append(html[last:m.start()])
            out.append(" ")
            last = m.end()
        if closing:
            depth = max(depth - 1, 0)
    out.append(html[last:])
    return "".join(out)


def html_blocks(html: str) -> tuple[str, str, list[tuple[int, str, str]]]:
    """(title, preamble, [(level, heading, body)]) of an HTML document."""
    tree = LexborHTMLParser(bound_nesting(html))
    title_node = tree.css_first("title")
    title = _text(title_node) if title_node is not None else ""
    if drop_hidden():
        hidden_html(tree)
    tree.strip_tags(STRIP_TAGS)
    root = tree.body or tree.root

    preamble: list[str] = []
    heads: list[tuple[int, str, list[str]]] = []
    parts = preamble
    if root is None:
        return title, "", []
    # Iterative document-order walk: (node, entering?) so block ends add line breaks.
    stack: list[tuple[LexborNode, bool, bool]] = [(root, True, False)]
    while stack:
        node, entering, in_pre = stack.pop()
        tag = node.tag
        if not entering:
            if tag in BLOCK_TAGS and tag not in ("li", "tr"):
                parts.append("\n\n" if tag in ("p", "pre", "table", "blockquote") else "\n")
            elif tag in CELL_TAGS:
                parts.append(" | ")
            continue
        if node.is_text_node:
            raw = node.text_content or ""
            parts.append(raw.replace(" ", _KEEP) if in_pre
                         else _SPACES.sub(" ", raw.replace("\n", " ")))
            continue
        if node.is_comment_node or tag is None or tag.startswith("-"):
            continue
        if tag in HEADINGS:
            # the heading is its text up to its first block: an unclosed <h1> holds the
            # paragraphs after it (the parser nests them), which are body, not title
            children = list(node.iter(include_text=True))
            cut = next((i for i, c in enumerate(children) if c.tag in BLOCK_TAGS), len(children))
            head = clean_heading(" ".join(c.text(deep=True, separator=" ")
                                          for c in children[:cut]))
            parts = []
            heads.append((HEADINGS[tag], head, parts))
            stack.extend((child, True, in_pre) for child in reversed(children[cut:]))
            continue
        if tag in BLOCK_TAGS:
            parts.append("\n")
            if tag == "li":
                parts.append("- ")
        if tag == "img":
            alt = node.attributes.get("alt")
            if alt and alt.strip():
                parts.append(f" {image_text(alt)} ")
        stack.append((node, False, in_pre))
        children = list(node.iter(include_text=True))
        pre = in_pre or tag in ("pre", "textarea")
        stack.extend((child, True, pre) for child in reversed(children))

    def join(chunks: list[str]) -> str:
        lines = [line.strip(" ") for line in "".join(chunks).split("\n")]
        lines = [line.rstrip(" |").strip() if line.endswith(" | ") or line.endswith("|")
                 else line for line in lines]
        return "\n".join(lines).replace(_KEEP, " ")

    bodies = [(lvl, h, join(b)) for lvl, h, b in heads]
    if not title:
        title = next((h for lvl, h, _ in heads if lvl == 1), "")
    return title, join(preamble), bodies


def parse_html(html: str, doc_id: str, source: str, fallback_title: str = "") -> ParsedDocument:
    title, preamble, heads = html_blocks(html)
    head_title, sections = build_sections(heads, preamble, title=title or fallback_title,
                                         text_title=title)
    return ParsedDocument(doc_id=doc_id, title=title or head_title or fallback_title,
                          source=source, sections=sections, mime="text/html")


@reader
class HtmlReader:
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")
    mime = "text/html"

    def parse(self, text: str, path: Path, doc_id: str) -> list[ParsedDocument]:
        doc = parse_html(text, doc_id, str(path), fallback_title=Path(path).stem)
        if not doc.sections:
            raise ReaderError("no text in the page (after removing scripts and navigation)")
        return [doc]

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        return self.parse(read_text(path), path, doc_id)
