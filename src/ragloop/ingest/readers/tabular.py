"""Spreadsheets and CSV: each row becomes a line that repeats its column headers
("Region: North; Units: 1,200"), so a chunk cut anywhere in a long sheet still says what each
value is. xlsx through openpyxl (MIT; values, not formulas), one section per sheet ("sheet1",
...); CSV through the standard library's csv module (dialect sniffed), one section.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.text import read_text


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return " ".join(str(value).split())


def rows_text(rows: Iterable[Sequence[object]]) -> str:
    """The first non-empty row is the header; every later row is "Header: value; ..."
    (a column without a header is named by its letter-free position, "column 3")."""
    header: list[str] | None = None
    lines: list[str] = []
    for raw in rows:
        row = [_cell(v) for v in raw]
        if not any(row):
            continue
        if header is None:
            header = row
            continue
        pairs = [(header[i] if i < len(header) and header[i] else f"column {i + 1}", v)
                 for i, v in enumerate(row) if v]
        lines.append("; ".join(f"{h}: {v}" for h, v in pairs) + ".")
    if header is not None and not lines:  # a sheet of one row: its text as it stands
        lines.append("; ".join(h for h in header if h) + ".")
    return "\n".join(lines)


class CsvReader:
    suffixes: tuple[str, ...] = (".csv", ".tsv")
    mime = "text/csv"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        text = read_text(path)
        try:
            dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
        except csv.Error:  # one column, or nothing the sniffer can tell apart
            dialect = csv.excel_tab if Path(path).suffix.lower() == ".tsv" else csv.excel
        try:
            body = rows_text(csv.reader(io.StringIO(text), dialect))
        except csv.Error as exc:
            raise ReaderError(f"malformed CSV: {exc}") from exc
        if not body.strip():
            raise ReaderError("no rows")
        title = Path(path).stem
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=[SectionText("1", (title,), body)], mime=self.mime)]


class XlsxReader:
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm")
    mime = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        import openpyxl

        try:
            # read_only streams rows; data_only gives the values Excel last computed
            book = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
        except Exception as exc:
            raise ReaderError(f"unreadable Excel file ({type(exc).__name__}: {exc})") from exc
        try:
            props = book.properties
            meta = clean_metadata({"title": props.title, "author": props.creator,
                                   "subject": props.subject, "date": props.created,
                                   "modified": props.modified})
            title = meta.get("title") or Path(path).stem
            sections = []
            for n, sheet in enumerate(book.worksheets, start=1):
                body = rows_text(sheet.iter_rows(values_only=True))
                if body.strip():
                    sections.append(SectionText(f"sheet{n}", (title, sheet.title), body))
        finally:
            book.close()
        if not sections:
            raise ReaderError("no values in any sheet")
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=sections, mime=self.mime, metadata=meta)]
