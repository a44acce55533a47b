"""PDF (pypdf for the text, pdfplumber for tables, OCR for pages without text): the outline
(bookmarks) becomes sections when there is one, else one section
per page ("p1", "p2", ...).

With an outline, each bookmark's section runs from its title on its destination page to the
next bookmark's title (found in the extracted text; at page granularity when a title cannot
be found). Text before the first bookmark is section "0". Section ids follow the shared rule
(ragloop.ingest.sections): "2.1 Bank details" is section "2.1".

Invisible text (render mode 3 or 7) is not read unless RAGLOOP_HIDDEN_TEXT=keep, except on a
scanned page, where it is the OCR layer (readers/pdf_visibility.py).

A page with ruled tables is read again by pdfplumber (MIT) and its tables kept as Markdown
tables; a PDF with no text layer (a scan) is rendered page by page and read by OCR when the
extra ragloop[ocr] is installed (readers/ocr.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest import limits
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.ocr import INSTALL_HINT, ocr_available, ocr_image
from ragloop.ingest.readers.office import markdown_table
from ragloop.ingest.readers.pdf_visibility import drop_invisible_text
from ragloop.ingest.readers.visibility import drop_hidden
from ragloop.ingest.sections import build_sections, clean_text

logging.getLogger("pypdf").setLevel(logging.ERROR)
logging.getLogger("pdfminer").setLevel(logging.ERROR)
# Render resolution for OCR: 200 dpi reads 10-point text reliably and keeps a page's image
# (and the OCR time) moderate.
OCR_DPI = 200


def _plumbed(path: Path, work):
    """`work(pdf)` over the file opened by pdfplumber; None when pdfplumber cannot read what
    pypdf could (the pypdf text is kept then)."""
    import pdfplumber

    try:
        with pdfplumber.open(str(path)) as pdf:
            return work(pdf)
    except Exception:  # pdfminer raises many kinds on files pypdf tolerates
        return None


def _page_texts(reader) -> tuple[list[str], set[int]]:
    """Each page's text (pypdf), and the pages whose invisible text was left out
    (pdf_visibility; RAGLOOP_HIDDEN_TEXT=keep reads it)."""
    texts, cleaned = [], set()
    for i, page in enumerate(reader.pages):
        if drop_hidden() and drop_invisible_text(page, reader):
            cleaned.add(i)
        texts.append(page.extract_text() or "")
        limits.spend_text(len(texts[-1]))  # a page at a time: the file's time and text limits
    return texts, cleaned


def _with_tables(path: Path, pages: list[str], skip: Collection[int] = ()) -> list[str]:
    """Pages that hold ruled tables, read again by pdfplumber: the text outside the tables,
    then each table as a Markdown table (pypdf gives a table as a run of its cells' words,
    which neither a reader nor BM25 can tell apart by column). Pages in `skip` keep pypdf's
    text: pdfminer does not tell invisible text apart, and they had some."""
    def work(pdf) -> list[str]:
        out = list(pages)
        for i, page in enumerate(pdf.pages[:len(pages)]):
            limits.check_time()
            if i in skip:
                continue
            tables = page.find_tables()
            if not tables:
                continue
            outside = page
            for table in tables:
                outside = outside.outside_bbox(table.bbox)
            parts = [outside.extract_text() or ""]
            parts += [markdown_table(t.extract()) for t in tables]
            out[i] = "\n\n".join(p for p in parts if p.strip())
        return out

    return _plumbed(path, work) or pages


def _ocr_pages(path: Path, reader) -> list[str]:
    """Each page read by OCR: a page that is one image (a scanner's page) from that image at
    its own resolution, which was 1.5 to 1.7 times faster than rendering and as good on the test
    scan (benchmarks/readers.py); any other page rendered at OCR_DPI (pypdfium2, through
    pdfplumber)."""
    def work(pdf) -> list[str]:
        out = []
        for plumbed, page in zip(pdf.pages, reader.pages, strict=False):
            limits.check_time()  # OCR is seconds a page: the file's time limit between pages
            try:
                images = list(page.images)
            except Exception:  # an image filter pypdf cannot decode: render the page
                images = []
            image = (images[0].image if len(images) == 1 else None) or plumbed.to_image(
                resolution=OCR_DPI).original
            out.append(ocr_image(image))
        return out

    pages = _plumbed(path, work)
    if pages is None:
        raise ReaderError("PDF has no text layer and its pages could not be rendered for OCR")
    return pages


def _properties(meta) -> dict:
    """The document information dictionary's title, author, subject and dates (metadata)."""
    if meta is None:
        return {}
    raw: dict = {"title": meta.title, "author": meta.author, "subject": meta.subject}
    try:  # pypdf parses the PDF date format; a malformed one raises
        raw["date"] = meta.creation_date
        raw["modified"] = meta.modification_date
    except Exception:
        pass
    return clean_metadata(raw)


def _outline(reader, items, level: int = 1) -> list[tuple[int, str, int]]:
    """(level, title, page index) for every bookmark, in document order."""
    out: list[tuple[int, str, int]] = []
    for item in items:
        if isinstance(item, list):
            out.extend(_outline(reader, item, level + 1))
            continue
        try:
            page = reader.get_destination_page_number(item)
        except Exception:  # a bookmark to nowhere: skip it, keep the rest
            continue
        title = " ".join(str(getattr(item, "title", "") or "").split())
        if page is not None and page >= 0 and title:
            out.append((level, title, page))
    return out


def _find_title(text: str, title: str, lo: int, hi: int) -> int:
    """Where `title` starts in text[lo:hi] (whitespace-insensitive), or -1."""
    words = [re.escape(w) for w in title.split()]
    if not words:
        return -1
    m = re.compile(r"\s+".join(words), re.IGNORECASE).search(text, lo, hi)
    return m.start() if m else -1


def outline_blocks(pages: list[str], outline: list[tuple[int, str, int]]
                   ) -> tuple[str, list[tuple[int, str, str]]]:
    """(preamble, [(level, heading, body)]) from page texts and bookmarks."""
    starts: list[int] = []
    pos = 0
    for text in pages:
        starts.append(pos)
        pos += len(text) + 1
    full = "\n".join(pages)
    page_end = [s + len(t) for s, t in zip(starts, pages, strict=True)]
    # (start of the section's text, start of its body) per bookmark, in order
    ordered = sorted(outline, key=lambda o: o[2])
    marks: list[tuple[int, int] | None] = []
    floor = 0
    for _, title, page in ordered:
        lo = max(starts[page], floor)
        at = _find_title(full, title, lo, page_end[page])
        if at < 0 and page + 1 < len(pages):
            # writers often point a bookmark at the page before a heading that a page break
            # pushed onto the next one
            at = _find_title(full, title, lo, page_end[page + 1])
        if at < 0:
            marks.append(None)  # not in the text: never take a neighbour's text for it
            continue
        m = re.compile(r"\s+".join(re.escape(w) for w in title.split()),
                       re.IGNORECASE).match(full, at)
        body = m.end() if m else at
        marks.append((at, body))
        floor = body
    # an unfound bookmark sits where the next found one starts (an empty body: it still
    # heads its children), or at its page's start when its page comes after the last mark
    for i in range(len(marks) - 1, -1, -1):
        if marks[i] is None:
            nxt = marks[i + 1][0] if i + 1 < len(marks) and marks[i + 1] else len(full)
            marks[i] = (nxt, nxt)
    found: list[tuple[int, int]] = [m for m in marks if m is not None]
    heads: list[tuple[int, str, str]] = []
    for i, (level, title, _) in enumerate(ordered):
        end = found[i + 1][0] if i + 1 < len(found) else len(full)
        heads.append((level, title, full[found[i][1]:end]))
    preamble = full[:found[0][0]] if found else full
    return preamble, heads


@reader
class PdfReader:
    suffixes: tuple[str, ...] = (".pdf",)
    mime = "application/pdf"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        from pypdf import PdfReader as Pypdf

        try:
            reader = Pypdf(str(path))
            if reader.is_encrypted:
                try:
                    ok = reader.decrypt("")
                except Exception as exc:
                    raise ReaderError(f"encrypted PDF, cannot open it: {exc}") from exc
                if not ok:
                    raise ReaderError("encrypted PDF (needs a password)")
            pages, cleaned = _page_texts(reader)
            try:
                outline = _outline(reader, reader.outline)
            except Exception:  # a broken outline: fall back to pages
                outline = []
            meta = reader.metadata
            meta_title = str(meta.title or "") if meta is not None else ""
            properties = _properties(meta)
        except ReaderError:
            raise
        except Exception as exc:  # pypdf raises many kinds on corrupt files
            raise ReaderError(f"unreadable PDF ({type(exc).__name__}: {exc})") from exc
        pages = [p.replace("\x00", "") for p in pages]
        if not any(p.strip() for p in pages):
            if not ocr_available():
                raise ReaderError("PDF has no extractable text (scanned images?); "
                                  + INSTALL_HINT)
            pages = _ocr_pages(path, reader)
            properties["ocr"] = "rapidocr"
            if not any(p.strip() for p in pages):
                raise ReaderError("PDF has no extractable text, and OCR found none")
        else:
            pages = _with_tables(path, pages, skip=cleaned)
        title = " ".join(meta_title.split()) or Path(path).stem
        if outline:
            preamble, heads = outline_blocks(pages, outline)
            head_title, sections = build_sections(heads, preamble, title=title)
            title = " ".join(meta_title.split()) or head_title or title
        else:
            sections = [SectionText(f"p{i}", (title, f"Page {i}"), clean_text(text))
                        for i, text in enumerate(pages, start=1) if clean_text(text)]
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path), sections=sections,
                               mime="application/pdf", metadata=properties)]
