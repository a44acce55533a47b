"""PDF: the outline (bookmarks) becomes sections when there is one, else one section per page."""

from __future__ import annotations

import logging
from pathlib import Path

from ragloop.errors import ReaderError
from ragloop.ingest.sections import build_sections, clean_text
from ragloop.types import ParsedDocument, SectionText

logging.getLogger("pypdf").setLevel(logging.ERROR)


def _outline(reader, items, level: int = 1) -> list[tuple[int, str, int]]:
    """(level, title, page index) for every bookmark, in order."""
    out: list[tuple[int, str, int]] = []
    for item in items:
        if isinstance(item, list):
            out.extend(_outline(reader, item, level + 1))
            continue
        try:
            page = reader.get_destination_page_number(item)
        except Exception:  # a bookmark to nowhere: skip it, keep the rest
            continue
        if page is not None and page >= 0:
            out.append((level, str(item.title or "").strip(), page))
    return out


def _split_at_title(page_text: str, title: str) -> tuple[str, str]:
    """Text before and from the bookmark's title on its page (page granularity otherwise)."""
    at = page_text.find(title) if title else -1
    return (page_text[:at], page_text[at + len(title):]) if at >= 0 else ("", page_text)


class PdfReader:
    suffixes: tuple[str, ...] = (".pdf",)

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        from pypdf import PdfReader as Pypdf
        from pypdf.errors import PdfReadError

        try:
            reader = Pypdf(str(path))
            if reader.is_encrypted:
                try:
                    reader.decrypt("")
                except Exception as exc:
                    raise ReaderError("encrypted PDF (needs a password)") from exc
            pages = [page.extract_text() or "" for page in reader.pages]
            outline = _outline(reader, reader.outline)
            meta_title = (reader.metadata.title if reader.metadata else None) or ""
        except ReaderError:
            raise
        except (PdfReadError, OSError, ValueError, KeyError, TypeError) as exc:
            raise ReaderError(f"unreadable PDF: {exc}") from exc
        except Exception as exc:  # pypdf raises many kinds on corrupt files
            raise ReaderError(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
        if not any(p.strip() for p in pages):
            raise ReaderError("PDF has no extractable text (scanned images?)")
        first_line = next((ln.strip() for ln in pages[0].splitlines() if ln.strip()), "")
        title = meta_title.strip() or first_line or path.stem
        if outline:
            sections = self._by_outline(pages, outline, title)
        else:
            sections = [SectionText(f"p{i}", (title, f"Page {i}"), clean_text(text))
                        for i, text in enumerate(pages, start=1) if clean_text(text)]
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path), sections=sections,
                               mime="application/pdf")]

    def _by_outline(self, pages: list[str], outline: list[tuple[int, str, int]],
                    title: str) -> list[SectionText]:
        triples: list[tuple[int, str, str]] = []
        preamble_parts = pages[:outline[0][2]]
        for i, (level, head, page) in enumerate(outline):
            end_page = outline[i + 1][2] if i + 1 < len(outline) else len(pages) - 1
            before, body = _split_at_title(pages[page], head)
            if i == 0:
                preamble_parts.append(before)
            text = [body]
            for p in range(page + 1, end_page + 1):
                text.append(pages[p])
            if i + 1 < len(outline):  # cut the next bookmark's part off the last page
                nxt = outline[i + 1]
                last = text.pop() if nxt[2] > page else body
                cut, _ = _split_at_title(last, nxt[1])
                if nxt[2] > page:
                    text.append(cut if nxt[1] and nxt[1] in last else "")
                else:
                    text = [cut]
            triples.append((level + 1, head, "\n".join(text)))
        preamble = "\n".join(preamble_parts)
        lines = preamble.strip().splitlines()
        if lines and lines[0].strip() == title:
            preamble = "\n".join(lines[1:])
        _, sections = build_sections([(1, title, preamble), *triples], "", title=title)
        return sections
