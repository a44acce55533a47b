"""Spreadsheets and CSV: each row becomes a line that repeats its column headers
("Region: North; Units: 1,200"), so a chunk cut anywhere in a long sheet still says what each
value is. xlsx through openpyxl (MIT; values, not formulas), one section per sheet ("sheet1",
...); CSV through the standard library's csv module (dialect sniffed), one section.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest import limits
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.base import reader
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
    budget = limits.current()
    for raw in limits.bounded_rows(rows):
        row = [_cell(v) for v in raw]
        if not any(row):
            continue
        if header is None:
            header = row
            continue
        pairs = [(header[i] if i < len(header) and header[i] else f"column {i + 1}", v)
                 for i, v in enumerate(row) if v]
        lines.append("; ".join(f"{h}: {v}" for h, v in pairs) + ".")
        budget.spend_text(len(lines[-1]))  # headers repeated on every line: text outgrows input
    if header is not None and not lines:  # a sheet of one row: its text as it stands
        lines.append("; ".join(h for h in header if h) + ".")
    return "\n".join(lines)


def _narrow_lines(text: str, dialect: type[csv.Dialect] | csv.Dialect) -> Iterator[str]:
    """The lines of `text` for csv.reader, refused where one would make a row wider than the
    columns limit: csv builds a whole row before it returns it (25M cells on one line
    would be held at once), so a line is measured first by its delimiters, outside quotes
    when it has more than the limit (a quoted field may hold delimiters)."""
    budget = limits.current()
    most = budget.limits.max_columns
    delimiter, quote = dialect.delimiter, dialect.quotechar
    quoted = re.compile(f"{re.escape(quote)}[^{re.escape(quote)}]*{re.escape(quote)}"
                        ) if quote else None
    for n, line in enumerate(io.StringIO(text), start=1):
        if line.count(delimiter) >= most:
            bare = quoted.sub("", line) if quoted is not None else line
            if bare.count(delimiter) >= most:
                raise limits.ReadLimitError(f"line {n:,} holds more columns than the limit",
                                            "read_max_columns", most)
        yield line


@reader
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
            body = rows_text(csv.reader(_narrow_lines(text, dialect), dialect))
        except csv.Error as exc:
            raise ReaderError(f"malformed CSV: {exc}") from exc
        if not body.strip():
            raise ReaderError("no rows")
        title = Path(path).stem
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=[SectionText("1", (title,), body)], mime=self.mime)]


@reader
class XlsxReader:
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm")
    mime = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        import openpyxl

        try:
            # read_only streams rows; data_only gives the values Excel last computed
            limits.check_archive(path)
            book = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
        except ReaderError:
            raise
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
                # the sheet's <dimension> is not believed: read-only openpyxl pads every row
                # to the width (and the sheet to the rows) it claims, "A1:XFD1048576" is 17
                # billion cells; without it each row is as wide as its last cell
                # (openpyxl docs, read-only mode, "Worksheet dimensions")
                sheet.reset_dimensions()
                body = rows_text(sheet.iter_rows(values_only=True))
                if body.strip():
                    sections.append(SectionText(f"sheet{n}", (title, sheet.title), body))
        finally:
            book.close()
        if not sections:
            raise ReaderError("no values in any sheet")
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=sections, mime=self.mime, metadata=meta)]
