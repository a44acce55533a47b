"""EPUB (2 and 3): the chapters in spine order, each read by the HTML reader, their headings
one section tree; the package's Dublin Core title, creator and date as metadata.

Read with the standard library (zipfile, ElementTree) rather than EbookLib, which is
AGPL-3.0 and may not be in the default install; an EPUB is a zip of XHTML files listed by
its package document (OPF), which is all this needs.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from xml.etree import ElementTree

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest import limits
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.html import html_blocks
from ragloop.ingest.readers.text import decode_bytes
from ragloop.ingest.sections import build_sections

_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container",
       "opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/"}
_XHTML = ("application/xhtml+xml", "text/html")


def _package(book: zipfile.ZipFile) -> tuple[str, ElementTree.Element]:
    container = ElementTree.fromstring(limits.read_member(book, "META-INF/container.xml"))
    rootfile = container.find(".//c:rootfile", _NS)
    if rootfile is None or not rootfile.get("full-path"):
        raise ReaderError("EPUB without a package document (META-INF/container.xml)")
    opf = rootfile.get("full-path", "")
    return opf, ElementTree.fromstring(limits.read_member(book, opf))


@reader
class EpubReader:
    suffixes: tuple[str, ...] = (".epub",)
    mime = "application/epub+zip"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        try:
            with zipfile.ZipFile(path) as book:
                limits.check_archive(book, inflate=False)  # read_member counts each chapter
                opf, package = _package(book)
                base = posixpath.dirname(opf)
                manifest = {item.get("id"): item for item in package.iterfind(
                    "opf:manifest/opf:item", _NS)}
                chapters = []
                for ref in package.iterfind("opf:spine/opf:itemref", _NS):
                    item = manifest.get(ref.get("idref"))
                    if item is None or item.get("media-type") not in _XHTML:
                        continue
                    name = posixpath.normpath(posixpath.join(base, item.get("href", "")))
                    chapters.append(decode_bytes(limits.read_member(book, name)))
                dc = {key: package.findtext(f"opf:metadata/dc:{tag}", None, _NS)
                      for key, tag in (("title", "title"), ("author", "creator"),
                                       ("date", "date"), ("language", "language"))}
        except ReaderError:
            raise
        except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError) as exc:
            raise ReaderError(f"unreadable EPUB ({type(exc).__name__}: {exc})") from exc
        meta = clean_metadata(dc)
        if "date" in meta:
            meta["date"] = meta["date"][:10]  # "2021-03-04T00:00:00Z": the day is the date
        title = meta.get("title") or Path(path).stem
        preamble: list[str] = []
        heads: list[tuple[int, str, str]] = []
        for n, html in enumerate(chapters, start=1):
            chapter_title, before, blocks = html_blocks(html)
            limits.spend_text(len(before) + sum(len(body) for _, _, body in blocks))
            if not blocks:  # a chapter without headings: one section under its <title>
                if before.strip():
                    heads.append((1, chapter_title or f"Chapter {n}", before))
                continue
            if before.strip():
                if heads:
                    lvl, h, body = heads[-1]
                    heads[-1] = (lvl, h, f"{body}\n\n{before}")
                else:
                    preamble.append(before)
            heads.extend(blocks)
        used, sections = build_sections(heads, "\n\n".join(preamble), title=title)
        if not sections:
            raise ReaderError("no text in the book")
        return [ParsedDocument(doc_id=doc_id, title=meta.get("title") or used or title,
                               source=str(path), sections=sections, mime=self.mime,
                               metadata=meta)]
