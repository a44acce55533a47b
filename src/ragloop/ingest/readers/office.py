"""Word and PowerPoint files through python-docx and python-pptx (both MIT).

docx: the heading styles ("Heading 1".."Heading 9", "Title") become the section tree, as
Markdown headings do; tables are kept as Markdown tables in the text where they stand; hidden
runs (`w:vanish`) are not read unless RAGLOOP_HIDDEN_TEXT=keep.
pptx: one section per slide ("s1", "s2", ...), titled by the slide's title placeholder, with
the text of its other shapes, its tables and its speaker notes.
Both carry the file's core properties (title, author, created) as metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest import limits
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.visibility import drop_hidden
from ragloop.ingest.sections import build_sections, clean_text

_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def markdown_table(rows: Iterable[Iterable[object]]) -> str:
    """Rows as a Markdown table, the first row as its header; cells on one line each."""
    cleaned = [[" ".join(str(c if c is not None else "").split()).replace("|", "/")
                for c in row] for row in rows]
    cleaned = [r for r in cleaned if any(r)]
    if not cleaned:
        return ""
    width = max(len(r) for r in cleaned)
    cleaned = [r + [""] * (width - len(r)) for r in cleaned]
    lines = ["| " + " | ".join(cleaned[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cleaned[1:]]
    return "\n".join(lines)


def core_properties(props: Any) -> dict[str, Any]:
    """title, author, subject, keywords and created date of an OOXML file (docx, pptx)."""
    return clean_metadata({"title": props.title, "author": props.author,
                           "subject": props.subject, "keywords": props.keywords,
                           "date": props.created, "modified": props.modified})


def _style_names() -> Callable[[Any], str]:
    """A paragraph's style name, looked up once per style id: python-docx's Paragraph.style
    looks for the default style through every style of the document on each call (1.7 ms a
    paragraph with python-docx's own template: 70 s for 30,000 paragraphs)."""
    names: dict[str | None, str] = {}

    def name(paragraph: Any) -> str:
        style_id = paragraph._p.style  # w:pPr/w:pStyle/@w:val, None for the default
        if style_id not in names:
            style = paragraph.style
            names[style_id] = (style.name if style is not None else "") or ""
        return names[style_id]

    return name


def _docx_blocks(document: Any) -> Iterator[tuple[int, str]]:
    """(heading level or 0, text) of the body's paragraphs and tables, in document order."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    style_name = _style_names()
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            style = style_name(item)
            m = _HEADING.match(style)
            level = int(m.group(1)) if m else 1 if style.lower() == "title" else 0
            yield level, paragraph_text(item)
        elif isinstance(item, Table):
            yield 0, markdown_table(["\n".join(paragraph_text(p) for p in cell.paragraphs)
                                     for cell in row.cells] for row in item.rows)


def paragraph_text(paragraph: Any) -> str:
    """A paragraph's text without its hidden runs (`w:vanish`, `w:specVanish`: Word does not
    show them) unless RAGLOOP_HIDDEN_TEXT=keep."""
    from docx.text.hyperlink import Hyperlink

    if not drop_hidden():
        return paragraph.text
    style = paragraph.style
    inherited = bool(style is not None and style.font.hidden)
    parts = []
    for item in paragraph.iter_inner_content():
        runs = item.runs if isinstance(item, Hyperlink) else [item]
        parts += [run.text for run in runs if not _hidden_run(run, inherited)]
    return "".join(parts)


def _hidden_run(run: Any, inherited: bool) -> bool:
    """Whether Word hides this run: its own properties, else its character style's, else the
    paragraph style's (`inherited`). python-docx reads `w:vanish` as font.hidden; `w:specVanish`
    (hidden always, even when hidden text is shown) it does not name, so it is read here."""
    from docx.oxml.ns import qn

    rpr = run._r.rPr
    if rpr is not None:
        spec = rpr.find(qn("w:specVanish"))
        if spec is not None and spec.get(qn("w:val"), "true") not in ("0", "false", "off"):
            return True
        if run.font.hidden is not None:
            return bool(run.font.hidden)
        if rpr.find(qn("w:rStyle")) is not None:
            style = run.style
            if style is not None and style.font.hidden is not None:
                return bool(style.font.hidden)
    return inherited


@reader
class DocxReader:
    suffixes: tuple[str, ...] = (".docx",)
    mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        import docx

        try:
            limits.check_archive(path)
            document = docx.Document(str(path))
        except ReaderError:
            raise
        except Exception as exc:  # not a zip, no word/document.xml, bad XML
            raise ReaderError(f"unreadable Word file ({type(exc).__name__}: {exc})") from exc
        preamble: list[str] = []
        heads: list[tuple[int, str, list[str]]] = []
        for level, text in _docx_blocks(document):
            limits.spend_text(len(text))
            if level:
                heads.append((level, text, []))
            elif text.strip():
                (heads[-1][2] if heads else preamble).append(text)
        meta = core_properties(document.core_properties)
        title = meta.get("title") or Path(path).stem
        used, sections = build_sections([(lvl, h, "\n\n".join(b)) for lvl, h, b in heads],
                                         "\n\n".join(preamble), title=title)
        if not sections:
            raise ReaderError("no text in the document")
        return [ParsedDocument(doc_id=doc_id, title=meta.get("title") or used or title,
                               source=str(path), sections=sections, mime=self.mime,
                               metadata=meta)]


def _shape_text(shape: Any) -> list[str]:
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    out: list[str] = []
    if isinstance(shape, GraphicFrame) and shape.has_table:
        out.append(markdown_table([c.text for c in row.cells] for row in shape.table.rows))
    elif isinstance(shape, GroupShape):
        for inner in shape.shapes:
            out += _shape_text(inner)
    elif shape.has_text_frame:
        out.append(shape.text_frame.text)
    return out


@reader
class PptxReader:
    suffixes: tuple[str, ...] = (".pptx",)
    mime = "application/vnd.openxmlformats-officedocument.presentationml.presentation"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        import pptx

        try:
            limits.check_archive(path)
            deck = pptx.Presentation(str(path))
        except ReaderError:
            raise
        except Exception as exc:
            raise ReaderError(f"unreadable PowerPoint file ({type(exc).__name__}: {exc})"
                              ) from exc
        meta = core_properties(deck.core_properties)
        title = meta.get("title") or Path(path).stem
        sections = []
        for n, slide in enumerate(deck.slides, start=1):
            heading = slide.shapes.title
            head = " ".join(heading.text.split()) if heading is not None else ""
            # each access makes a new proxy object: the title shape is known by its id
            title_id = heading.shape_id if heading is not None else None
            parts = [t for shape in slide.shapes if shape.shape_id != title_id
                     for t in _shape_text(shape)]
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                parts.append(slide.notes_slide.notes_text_frame.text)
            body = clean_text("\n\n".join(p for p in parts if p.strip()))
            limits.spend_text(len(body))
            if head or body:
                sections.append(SectionText(f"s{n}", (title, head or f"Slide {n}"),
                                            body or head))
        if not sections:
            raise ReaderError("no text on any slide")
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=sections, mime=self.mime, metadata=meta)]
