"""HTML: h1–h6 become sections; scripts, styles, navigation and page chrome are stripped."""

from __future__ import annotations

from pathlib import Path

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from ragloop.errors import ReaderError
from ragloop.ingest.readers.text import read_text
from ragloop.ingest.sections import build_sections
from ragloop.types import ParsedDocument

_CHROME = "script, style, nav, header, footer, aside, noscript, svg, form, template, iframe"
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = {"p", "li", "pre", "blockquote", "tr", "dd", "dt", "td", "th", "div", "section",
           "article", "table", "ul", "ol", "dl", "figcaption", "caption", "main", "body"}


def parse_html(html: str, doc_id: str, source: str, fallback_title: str = "") -> ParsedDocument:
    tree = HTMLParser(html)
    title_node = tree.css_first("title")
    page_title = title_node.text(strip=True) if title_node else ""
    for node in tree.css(_CHROME):
        node.decompose()
    root = tree.body or tree.root
    if root is None:
        raise ReaderError("no HTML body")
    preamble: list[str] = []
    heads: list[tuple[int, str, list[str]]] = []

    def emit(text: str) -> None:
        text = " ".join(text.split())
        if text:
            (heads[-1][2] if heads else preamble).append(text)

    def walk(node) -> None:
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                emit(child.text(deep=False))
            elif tag in _HEADINGS:
                heads.append((_HEADINGS[tag], " ".join(child.text().split()), []))
            elif tag in ("p", "li", "pre", "blockquote", "tr", "dt", "dd", "figcaption",
                         "caption"):
                if tag == "tr":
                    cells = [" ".join(c.text().split()) for c in child.css("td, th")]
                    emit(" | ".join(c for c in cells if c))
                else:
                    emit(child.text(separator=" "))
            elif tag in _BLOCKS:
                walk(child)
            else:
                emit(child.text(separator=" "))

    walk(root)
    triples = [(level, heading, "\n\n".join(body)) for level, heading, body in heads]
    title, sections = build_sections(triples, "\n\n".join(preamble),
                                     title=page_title or fallback_title)
    return ParsedDocument(doc_id=doc_id, title=title or page_title or fallback_title,
                          source=source, sections=sections, mime="text/html")


class HtmlReader:
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        doc = parse_html(read_text(path), doc_id, str(path), fallback_title=path.stem)
        if not doc.sections:
            raise ReaderError("no text in the HTML body")
        return [doc]
