"""Plain text files, and the byte decoding every text format shares.

Decoding never loses a readable file: BOM (UTF-8/16/32) first, then UTF-16/32 without a BOM
(told by where its NUL bytes sit), then strict UTF-8, then cp1252, then latin-1. Empty files
and binary content (magic numbers, NUL bytes, mostly control characters) raise ReaderError
instead of producing garbage.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest import limits
from ragloop.ingest.readers.base import reader
from ragloop.ingest.sections import build_sections, clean_text, explicit_number

SNIFF_BYTES = 8192

_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive (or docx/xlsx)"),
    (b"\x1f\x8b", "gzip data"),
    (b"\x7fELF", "an executable"),
    (b"MZ", "an executable"),
    (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Office document"),
    (b"RIFF", "RIFF media"),
    (b"OggS", "Ogg media"),
    (b"ID3", "MP3 audio"),
    (b"\x00\x00\x00", "binary data"),
)

# Control characters that do not occur in text (tab, newline, CR, form feed, ESC allowed).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f-\x9f]")


def _binary(what: str) -> ReaderError:
    return ReaderError(f"binary file ({what}), not text")


# (encoding, code unit width, offsets within a unit where the high bytes of Latin text sit)
_UNMARKED = (
    ("utf-32-le", 4, (1, 2, 3)),
    ("utf-32-be", 4, (0, 1, 2)),
    ("utf-16-le", 2, (1,)),
    ("utf-16-be", 2, (0,)),
)


def _unmarked_utf(data: bytes) -> str | None:
    """UTF-16/32 text written without a byte-order mark (Windows tools do), else None.

    Text in such a file that is mostly Latin script has a NUL byte as the high byte of most
    code units and nowhere else; binary data has its NULs scattered. The text must also decode
    strictly and read as text (no NUL characters, few controls)."""
    for encoding, width, high in _UNMARKED:
        head = data[:SNIFF_BYTES - SNIFF_BYTES % width]
        if len(data) % width or not head:
            continue
        nul_at = [i % width for i, b in enumerate(head) if b == 0]
        units = len(head) // width
        if any(pos not in high for pos in nul_at) or nul_at.count(high[-1]) < units // 4:
            continue
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        sample = text[:SNIFF_BYTES]
        if "\x00" in sample or len(_CONTROL.findall(sample)) > max(2, len(sample) // 20):
            continue
        return text
    return None


def decode_bytes(data: bytes) -> str:
    """Text from a text file's bytes; ReaderError for an empty or binary file."""
    if not data.strip():
        raise ReaderError("empty file")
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(encoding)
            except UnicodeDecodeError as exc:
                raise _binary(f"broken {encoding.upper()} after its byte-order mark") from exc
            if not text.strip():
                raise ReaderError("empty file")
            return text
    head = data[:SNIFF_BYTES]
    if b"\x00" in head and (unmarked := _unmarked_utf(data)) is not None:
        if not unmarked.strip():
            raise ReaderError("empty file")
        return unmarked
    for magic, what in _MAGIC:
        if head.startswith(magic):
            # MZ/RIFF/ID3 could start a text file: only call it binary if it is not text-like
            if magic in (b"MZ", b"RIFF", b"ID3", b"BZh", b"OggS") and b"\x00" not in head:
                break
            raise _binary(f"looks like {what}")
    if b"\x00" in head:
        raise _binary("contains NUL bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
    sample = text[:SNIFF_BYTES]
    if len(_CONTROL.findall(sample)) > max(2, len(sample) // 20):
        raise _binary("mostly control characters")
    return text


def read_text(path: Path) -> str:
    """Decoded text of a file (see decode_bytes); ReaderError when it cannot be read."""
    limits.check_size(path)  # held whole in memory
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ReaderError(f"cannot read file: {exc.strerror or exc}") from exc
    return decode_bytes(data)


# "3. Scope" / "3.2 Approval thresholds" / "Section 4 – Claims" alone on a line.
_HEADING_LINE = re.compile(
    r"^[ \t]*((?:(?:section|chapter|part)\s+)?\d{1,3}(?:\.\d{1,3})*\.?)[ \t]+"
    r"(\S.{0,118})$",
    re.IGNORECASE,
)
_MAX_HEADING_WORDS = 14
_LIST_ITEM = re.compile(r"^[ \t]*(?:\d{1,3}(?:\.\d{1,3})*[.)]?|[-*•])[ \t]+\S")


def _heading(line: str, prev_blank: bool) -> tuple[int, str] | None:
    """(level, heading) when a line is a numbered heading, else None."""
    if not prev_blank:
        return None
    m = _HEADING_LINE.match(line)
    if not m:
        return None
    rest = m.group(2).rstrip()
    if (not rest[0].isalpha() and rest[0] not in "–—-:") or rest[-1] in ".,;!?":
        return None
    if len(rest.split()) > _MAX_HEADING_WORDS:
        return None
    number = explicit_number(line.strip())
    if number is None:
        return None
    return number.count(".") + 1, " ".join(line.split())


def _title_line(lines: list[str]) -> tuple[str, int] | None:
    """A short first line followed by a blank line (or the end), used as the title."""
    idx = next((i for i, line in enumerate(lines) if line.strip()), None)
    if idx is None:
        return None
    first = lines[idx].strip()
    after_blank = idx + 1 >= len(lines) or not lines[idx + 1].strip()
    if (after_blank and len(first) <= 100 and first[-1] not in ".,;:!?"
            and explicit_number(first) is None and len(first.split()) <= 14):
        return first, idx
    return None


def parse_text(text: str, doc_id: str, source: str, fallback_title: str = "") -> ParsedDocument:
    """Sections of a plain-text document: numbered headings alone on a line, if any.

    A numbered line counts as a heading only when text follows it before the next heading,
    or a deeper heading does ("4 Approvals" then "4.1 Booking"), so numbered lists stay text.
    """
    lines = clean_text(text).split("\n")
    title = _title_line(lines)
    start = title[1] + 1 if title is not None else 0
    lines = lines[start:]
    candidates: list[tuple[int, int, str]] = []  # (line index, level, heading)
    prev_blank = True
    for i, line in enumerate(lines):
        found = _heading(line, prev_blank)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if found is not None and not _LIST_ITEM.match(following):
            candidates.append((i, *found))
        prev_blank = not line.strip()
    accepted: list[tuple[int, int, str]] = []
    for k, (i, level, heading) in enumerate(candidates):
        nxt = candidates[k + 1] if k + 1 < len(candidates) else None
        stop = nxt[0] if nxt else len(lines)
        has_body = any(line.strip() for line in lines[i + 1:stop])
        if has_body or (nxt is not None and nxt[1] > level):
            accepted.append((i, level, heading))
    heads: list[tuple[int, str, str]] = [(0, title[0], "")] if title is not None else []
    first = accepted[0][0] if accepted else len(lines)
    preamble = "\n".join(lines[:first])
    for k, (i, level, heading) in enumerate(accepted):
        stop = accepted[k + 1][0] if k + 1 < len(accepted) else len(lines)
        heads.append((level, heading, "\n".join(lines[i + 1:stop])))
    doc_title, sections = build_sections(heads, preamble, title=fallback_title)
    return ParsedDocument(doc_id=doc_id, title=doc_title or fallback_title, source=source,
                          sections=sections, mime="text/plain")


@reader
class TextReader:
    suffixes: tuple[str, ...] = (".txt", ".text", ".log")
    mime = "text/plain"

    def parse(self, text: str, path: Path, doc_id: str) -> list[ParsedDocument]:
        doc = parse_text(text, doc_id, str(path), fallback_title=Path(path).stem)
        if not doc.sections:
            raise ReaderError("no text")
        return [doc]

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        return self.parse(read_text(path), path, doc_id)
