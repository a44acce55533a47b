"""Issue 39, point 1 and the link-local part of point 5: every reader and download is bounded
while it reads (ingest/limits.py, ingest/fetch.py). Each hostile file is built here, smaller
than the issue's where a smaller one proves the same thing (the limits set low); past a limit
the file is refused with an error naming the setting, quickly, and the other files go in."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from format_samples import make_docx, make_epub, make_pptx, make_xlsx
from reliability_kit import HashEmbedder

from ragloop.core.config import Settings
from ragloop.core.errors import ReaderError
from ragloop.ingest.fetch import Reach, download, refusal
from ragloop.ingest.limits import ReadLimitError, ReadLimits
from ragloop.ingest.readers import read_file
from ragloop.kb import KnowledgeBase

PARAGRAPH = "<w:p><w:r><w:t>bomb</w:t></w:r></w:p>"


def rezip(src: Path, dst: Path, changes: dict[str, str | bytes]) -> Path:
    """`src` with some members' content replaced (or added), deflated at level 9."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED,
                                                       compresslevel=9) as new:
        for info in old.infolist():
            new.writestr(info.filename, changes.pop(info.filename, old.read(info)))
        for name, data in changes.items():
            new.writestr(name, data)
    return dst


def docx_bomb(tmp_path: Path, paragraphs: int) -> Path:
    make_docx(tmp_path / "plain.docx")
    with zipfile.ZipFile(tmp_path / "plain.docx") as z:
        xml = z.read("word/document.xml").decode()
    at = xml.index("<w:body>") + len("<w:body>")
    return rezip(tmp_path / "plain.docx", tmp_path / "bomb.docx",
                 {"word/document.xml": xml[:at] + PARAGRAPH * paragraphs + xml[at:]})


def refused(path: Path, setting: str, limits: ReadLimits | None = None,
            within: float = 5.0) -> ReadLimitError:
    started = time.monotonic()
    with pytest.raises(ReadLimitError) as caught:
        read_file(path, path.name, limits)
    assert time.monotonic() - started < within
    assert caught.value.setting == setting and f"RAGLOOP_{setting.upper()}" in str(caught.value)
    return caught.value


# -- zip members: docx, pptx, xlsx, epub ---------------------------------------------------

@pytest.mark.timeout(60)
def test_a_docx_whose_document_inflates_past_the_member_limit_is_refused(tmp_path) -> None:
    bomb = docx_bomb(tmp_path, 200_000)  # 7.8 MB of document.xml in a ~40 KB file
    assert bomb.stat().st_size < 100_000
    refused(bomb, "read_max_member_bytes", ReadLimits(max_member_bytes=2_000_000), within=2)
    # under the limit it is read, and its paragraphs count against the text limit as they come
    refused(bomb, "read_max_text_chars", ReadLimits(max_text_chars=50_000), within=30)


@pytest.mark.timeout(60)
def test_a_member_whose_header_lies_about_its_size_is_not_inflated_past_it(tmp_path) -> None:
    """The central directory says 1,000 bytes; the data inflates to 8 MB: what zipfile gives
    stops at the declared size, and the member is refused as broken, not read whole."""
    bomb = docx_bomb(tmp_path, 200_000)
    data = bytearray(bomb.read_bytes())
    name = b"word/document.xml"
    for signature, size_at in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        at = 0
        while (at := data.find(signature, at)) >= 0:
            name_at = at + (46 if signature == b"PK\x01\x02" else 30)
            if data[name_at:name_at + len(name)] == name:
                data[at + size_at:at + size_at + 4] = struct.pack("<I", 1000)
            at += 4
    liar = tmp_path / "liar.docx"
    liar.write_bytes(bytes(data))
    started = time.monotonic()
    with pytest.raises(ReaderError, match="unreadable Word file"):
        read_file(liar, "liar")
    assert time.monotonic() - started < 2


@pytest.mark.timeout(60)
def test_a_pptx_slide_bomb_is_refused(tmp_path) -> None:
    make_pptx(tmp_path / "deck.pptx")
    bomb = rezip(tmp_path / "deck.pptx", tmp_path / "bomb.pptx",
                 {"ppt/slides/slide1.xml": "<p:sld>" + " " * 6_000_000 + "</p:sld>"})
    refused(bomb, "read_max_member_bytes", ReadLimits(max_member_bytes=1_000_000), within=2)


@pytest.mark.timeout(60)
def test_members_that_inflate_past_the_archive_limit_are_refused(tmp_path) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    padded = rezip(tmp_path / "book.xlsx", tmp_path / "padded.xlsx",
                   {f"xl/media/image{i}.png": b"\0" * 1_000_000 for i in range(6)})
    refused(padded, "read_max_inflated_bytes", ReadLimits(max_inflated_bytes=5_000_000))
    assert read_file(padded, "p")[0].sections  # under the default limits it is read


def epub_with_chapter(tmp_path: Path, chapter: str) -> Path:
    make_epub(tmp_path / "book.epub")
    with zipfile.ZipFile(tmp_path / "book.epub") as z:
        first = next(n for n in z.namelist() if n.endswith((".xhtml", ".html")))
    return rezip(tmp_path / "book.epub", tmp_path / "bomb.epub", {first: chapter})


@pytest.mark.timeout(60)
def test_an_epub_chapter_that_inflates_hugely_is_refused_while_inflating(tmp_path) -> None:
    bomb = epub_with_chapter(tmp_path, "<html><body><p>" + "word " * 4_000_000
                             + "</p></body></html>")  # 20 MB in a ~20 KB file
    assert bomb.stat().st_size < 100_000
    refused(bomb, "read_max_member_bytes", ReadLimits(max_member_bytes=2_000_000), within=2)
    refused(bomb, "read_max_text_chars", ReadLimits(max_text_chars=1_000_000), within=10)


# -- spreadsheets and CSV ------------------------------------------------------------------

def xlsx_sheet(tmp_path: Path, sheet_xml: str) -> Path:
    make_xlsx(tmp_path / "book.xlsx")
    return rezip(tmp_path / "book.xlsx", tmp_path / "claimed.xlsx",
                 {"xl/worksheets/sheet1.xml": sheet_xml})


SHEET = ('<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
         '<dimension ref="{ref}"/><sheetData>{rows}</sheetData></worksheet>')
ROWS = ('<row r="1"><c r="A1" t="inlineStr"><is><t>Name</t></is></c><c r="B1" t="inlineStr">'
        '<is><t>Colour</t></is></c></row><row r="2"><c r="A2" t="inlineStr"><is><t>Plum</t>'
        '</is></c><c r="B2" t="inlineStr"><is><t>purple</t></is></c></row>')


@pytest.mark.timeout(60)
def test_an_xlsx_claiming_the_whole_sheet_with_a_cell_at_its_far_corner_is_refused(
        tmp_path) -> None:
    far = ROWS + '<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>'
    book = xlsx_sheet(tmp_path, SHEET.format(ref="A1:XFD1048576", rows=far))
    refused(book, "read_max_columns", within=10)  # the default limits


@pytest.mark.timeout(60)
def test_an_xlsx_whose_dimension_lies_is_read_by_its_cells(tmp_path) -> None:
    book = xlsx_sheet(tmp_path, SHEET.format(ref="A1:XFD1048576", rows=ROWS))
    started = time.monotonic()
    sheets = read_file(book, "b")[0].sections
    assert time.monotonic() - started < 5
    assert "Name: Plum; Colour: purple." in sheets[0].text


@pytest.mark.timeout(60)
def test_a_csv_of_100000_columns_is_refused(tmp_path) -> None:
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(100_000)) + "\n"
                    + ",".join(str(i) for i in range(100_000)) + "\n")
    refused(wide, "read_max_columns", within=2)


@pytest.mark.timeout(60)
def test_millions_of_cells_on_one_line_are_refused_before_csv_builds_the_row(tmp_path) -> None:
    line = tmp_path / "line.csv"
    line.write_text("a,b\n" + "x," * 3_000_000 + "x\n")  # 3M cells, 6 MB
    refused(line, "read_max_columns", within=2)


def test_quoted_delimiters_do_not_count_as_columns(tmp_path) -> None:
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('title,notes\nPlum,"' + "sweet, " * 3_000 + 'ripe"\n')
    doc = read_file(quoted, "q")[0]
    assert doc.sections[0].text.startswith("title: Plum; notes: sweet, sweet,")


@pytest.mark.timeout(60)
def test_cells_text_and_time_are_counted_while_a_csv_is_read(tmp_path) -> None:
    tall = tmp_path / "tall.csv"
    tall.write_text("name,colour\n" + "plum,purple\n" * 200_000)
    refused(tall, "read_max_cells", ReadLimits(max_cells=100_000))
    refused(tall, "read_max_text_chars", ReadLimits(max_text_chars=200_000))
    refused(tall, "read_timeout_s", ReadLimits(timeout_s=0.01))


def many_page_pdf(path: Path, pages: int) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    for n in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 5, f"Page {n} of the ledger. " * 40)
    pdf.output(str(path))
    return path


def test_a_pdf_is_held_to_the_time_and_text_limits_a_page_at_a_time(tmp_path) -> None:
    ledger = many_page_pdf(tmp_path / "ledger.pdf", 60)
    refused(ledger, "read_timeout_s", ReadLimits(timeout_s=0.0))
    refused(ledger, "read_max_text_chars", ReadLimits(max_text_chars=20_000))
    assert read_file(ledger, "ledger.pdf")  # within the defaults it reads


def test_a_text_file_larger_than_the_bytes_limit_is_refused_unread(tmp_path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("words and more words\n" * 100_000)
    refused(big, "read_max_bytes", ReadLimits(max_bytes=1_000_000), within=1)


def test_an_ingest_refuses_the_bomb_by_name_and_keeps_the_other_files(tmp_path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    docx_bomb(folder, 200_000)
    (folder / "plain.docx").unlink()
    (folder / "notes.md").write_text("# Notes\n\nThe plums ripen in August.\n")
    settings = Settings().with_(read_max_member_bytes=2_000_000)
    with KnowledgeBase.open(tmp_path / "kb", settings, embedder=HashEmbedder()) as kb:
        report = kb.ingest([folder])
    assert report.added == 1
    assert len(report.failed) == 1 and report.failed[0][0].endswith("bomb.docx")
    assert "RAGLOOP_READ_MAX_MEMBER_BYTES" in report.failed[0][1]


def test_the_limits_are_settings_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("RAGLOOP_READ_MAX_CELLS", "1000")
    monkeypatch.setenv("RAGLOOP_DOWNLOAD_TIMEOUT_S", "2.5")
    limits = ReadLimits.from_settings(Settings.from_env())
    assert limits.max_cells == 1000 and limits.download_timeout_s == 2.5
    assert ReadLimits.from_settings(Settings()) == ReadLimits()


# -- downloads -----------------------------------------------------------------------------

class Drip:
    """A real HTTP server on 127.0.0.1 that answers every request as `mode` says: "body"
    (Content-Length: 100000, then one byte every 0.3 s), "headers" (the status line, then
    a header byte every 0.3 s) or "flood" (no length, 4 MB sent as fast as it goes)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/page.html"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            if self.mode == "headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.stop.wait(0.3):
                    conn.sendall(b"X")
            elif self.mode == "body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                             b"Content-Length: 100000\r\n\r\n")
                while not self.stop.wait(0.3):
                    conn.sendall(b"<")
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                             b"Connection: close\r\n\r\n")
                for _ in range(64):
                    conn.sendall(b"<p>flood</p>" * 5_000)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def drip(request):
    server = Drip(request.param)
    yield server
    server.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("drip", ["body", "headers"], indirect=True)
def test_a_slow_server_meets_one_deadline_for_the_whole_download(drip, tmp_path) -> None:
    """1 byte every 0.3 s never lets a read time out; the download still ends at 2 s."""
    settings = Settings().with_(download_timeout_s=2.0)
    started = time.monotonic()
    with KnowledgeBase.open(tmp_path / "kb", settings, embedder=HashEmbedder()) as kb:
        (tmp_path / "notes.md").write_text("# Notes\n\nThe plums ripen in August.\n")
        report = kb.ingest([drip.url, tmp_path / "notes.md"], private_urls=True)
    assert time.monotonic() - started < 8
    assert report.added == 1 and report.failed[0][0] == drip.url
    assert "RAGLOOP_DOWNLOAD_TIMEOUT_S" in report.failed[0][1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("drip", ["flood"], indirect=True)
def test_a_download_past_the_bytes_limit_stops_there(drip) -> None:
    with pytest.raises(ReadLimitError, match="RAGLOOP_READ_MAX_BYTES"):
        download(drip.url, Reach(private=True), ReadLimits(max_bytes=1_000_000))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("drip", ["flood"], indirect=True)
def test_loopback_is_refused_at_the_socket_unless_allowed(drip) -> None:
    with pytest.raises(ReaderError, match="--private-urls"):
        download(drip.url)
    with pytest.raises(ReaderError, match="--private-urls"):  # link-local does not open it
        download(drip.url, Reach(link_local=True))
    assert len(download(drip.url, Reach(private=True))) == 64 * 5_000 * 12


@pytest.mark.parametrize("addr", ["169.254.169.254", "169.254.0.1", "fe80::1", "fe80::1%eth0",
                                  "::ffff:169.254.169.254", "2002:a9fe:a9fe::1",
                                  "64:ff9b::a9fe:a9fe", "fd00:ec2::254", "100.100.100.200"])
def test_link_local_and_metadata_addresses_need_their_own_allowance(addr) -> None:
    assert "--link-local-urls" in (refusal(addr, Reach()) or "")
    assert "--link-local-urls" in (refusal(addr, Reach(private=True)) or "")
    assert refusal(addr, Reach(link_local=True)) is None


@pytest.mark.parametrize("addr", ["127.0.0.1", "10.0.0.8", "192.168.1.1", "::1", "0.0.0.0",
                                  "::ffff:127.0.0.1", "fd12:3456::1"])
def test_private_addresses_need_private_urls_and_public_ones_nothing(addr) -> None:
    assert "--private-urls" in (refusal(addr, Reach()) or "")
    assert "--private-urls" in (refusal(addr, Reach(link_local=True)) or "")
    assert refusal(addr, Reach(private=True)) is None
    assert refusal("93.184.215.14", Reach()) is None


def test_the_cli_offers_link_local_urls() -> None:
    from typer.testing import CliRunner

    from ragloop.apps.cli import app

    result = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "200"})
    assert "--link-local-urls" in result.output and "--private-urls" in result.output


# -- property: random inputs stay within the limits ----------------------------------------

PROPERTY_LIMITS = ReadLimits(max_bytes=4_000_000, max_member_bytes=2_000_000,
                             max_inflated_bytes=8_000_000, max_cells=200_000, max_columns=500,
                             max_text_chars=2_000_000, timeout_s=3.0)
# what one read may take and hold on top of the interpreter, the libraries and hypothesis
PROPERTY_SECONDS = PROPERTY_LIMITS.timeout_s + 5.0
PROPERTY_MEMORY_MB = 400


def _property_run(folder: Path, examples: int) -> dict[str, float]:
    """Random docx/pptx/xlsx/epub/CSV/HTML files up to a few MB, each read within
    PROPERTY_LIMITS: how long the slowest took and how much the peak RSS grew."""
    import resource

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ragloop.ingest.readers.html import HtmlReader  # noqa: F401 (loaded before the baseline)

    samples = {}
    for make, name in ((make_docx, "s.docx"), (make_pptx, "s.pptx"), (make_xlsx, "s.xlsx"),
                       (make_epub, "s.epub")):
        make(folder / name)
        with zipfile.ZipFile(folder / name) as z:
            samples[name] = {n: z.read(n) for n in z.namelist()}
    for name in samples:  # import each library and read each kind once before the baseline
        read_file(folder / name, name)
    piece = st.sampled_from(["<w:p><w:r><w:t>x</w:t></w:r></w:p>", "<p>word ", "a,b,", "<div>",
                             "<c r=\"XFD9\"><v>1</v></c>", "\x00\xff", "é ", "\n", '"', ","])
    def repeated(parts: list[str], times: int) -> str:
        unit = "".join(parts)
        return unit * min(times, 3_000_000 // len(unit))  # up to 3 MB

    blob = st.builds(repeated, st.lists(piece, min_size=1, max_size=6),
                     st.integers(1, 300_000))
    kind = st.sampled_from([*samples, "s.csv", "s.html"])
    slowest = [0.0]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(kind, blob, st.integers(0, 20))
    def read_one(name: str, text: str, pick: int) -> None:
        path = folder / f"case{Path(name).suffix}"
        if name in samples:
            members = dict(samples[name])
            target = sorted(members)[pick % len(members)]
            members[target] = text.encode()
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for member, data in members.items():
                    z.writestr(member, data)
            path.write_bytes(buf.getvalue())
        else:
            path.write_text(text, encoding="utf-8")
        started = time.monotonic()
        with contextlib.suppress(ReaderError):
            read_file(path, "case", PROPERTY_LIMITS)
        slowest[0] = max(slowest[0], time.monotonic() - started)

    read_one()
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    return {"slowest_s": slowest[0], "grown_mb": grown}


@pytest.mark.timeout(300)
def test_random_office_zip_csv_and_html_inputs_stay_within_time_and_memory(tmp_path) -> None:
    """In a fresh process, so its peak RSS (lxml's and openpyxl's C memory included, which
    tracemalloc cannot see) is the readers' own."""
    tests = Path(__file__).parent
    code = ("import json, sys, pathlib; sys.path.insert(0, sys.argv[1]);"
            " import test_reader_limits as t;"
            " print(json.dumps(t._property_run(pathlib.Path(sys.argv[2]), 20)))")
    done = subprocess.run([sys.executable, "-c", code, str(tests), str(tmp_path)],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["slowest_s"] < PROPERTY_SECONDS, figures
    assert figures["grown_mb"] < PROPERTY_MEMORY_MB, figures


def test_an_html_or_markdown_file_is_held_to_the_parsed_part_limit(tmp_path) -> None:
    """Both are parsed into a tree in one library call (lexbor, markdown-it): 10 MB of
    <div> held 500 MB and took 7 s here, so their size is checked as a docx part's is."""
    for name, unit in (("page.html", "<div>"), ("notes.md", "- a\n")):
        path = tmp_path / name
        path.write_text(unit * 300_000)
        refused(path, "read_max_member_bytes", ReadLimits(max_member_bytes=1_000_000), within=1)
