"""Every format the readers take, on real-looking files made here (tests/format_samples.py):
a docx with headings and a table, a pptx of 5 slides, an xlsx of two sheets, a csv, an epub,
a scanned (image-only) PDF page, a PDF with a table, and web pages served by a local HTTP
server (one by URL, two through a sitemap). Each file's question is answered offline with a
citation of the section that holds the answer."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest
from format_samples import PAGE, Sample, make_files

from ragloop.agent.engine import Engine
from ragloop.core.config import Settings
from ragloop.core.types import RunStatus
from ragloop.ingest.readers import read_file
from ragloop.ingest.readers.ocr import ocr_available
from ragloop.kb import KnowledgeBase

SECOND = """<!doctype html><html><head><title>Allotment Rules</title></head><body>
<main><h1>Allotment Rules</h1><h2>Water</h2><p>Hoses may be used only before 9 in the
morning and after 7 in the evening, and every plot holder must fill the shared water butts
when the rain is scarce during the summer months.</p><h2>Sheds</h2><p>Sheds may be no taller
than two metres and must be painted green or brown so that they blend into the hedges.</p>
</main></body></html>"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A local web server: a page, a second one, and a sitemap listing both."""
    root = tmp_path_factory.mktemp("site")
    (root / "news.html").write_text(PAGE, encoding="utf-8")
    (root / "rules.html").write_text(SECOND, encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/'
        f'sitemap/0.9"><url><loc>{base}/news.html</loc></url><url><loc>{base}/rules.html'
        "</loc></url></urlset>", encoding="utf-8")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield base
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> tuple[Path, list[Sample]]:
    folder = tmp_path_factory.mktemp("formats")
    return folder, make_files(folder)


@pytest.fixture(scope="module")
def kb(samples, site, tmp_path_factory):
    folder, _ = samples
    path = tmp_path_factory.mktemp("kb") / "kb"
    with KnowledgeBase.open(path, Settings().with_(kb=str(path))) as base:
        files = base.ingest([folder])
        assert not files.failed and files.added == 7, files.failed
        web = base.ingest([f"{site}/sitemap.xml"], private_urls=True)
        assert not web.failed and web.added == 2, web.failed
        yield base


def test_each_format_is_read_into_its_sections(samples) -> None:
    folder, made = samples
    by_name = {s.name: s for s in made}
    for name, sample in by_name.items():
        doc = read_file(folder / name, name)[0]
        section = next(s for s in doc.sections if s.section == sample.section)
        if name.endswith(".pdf") and "scan" in name:
            # OCR: PP-OCRv4 drops some word spaces in English print; the digits stay
            assert "1,450" in section.text and doc.metadata.get("ocr") == "rapidocr"
        else:
            assert sample.answer in section.text, (name, section.text)
    slides = read_file(folder / "sales.pptx", "s")[0].sections
    assert [s.section for s in slides] == ["s1", "s2", "s3", "s4", "s5"]
    assert slides[1].title == "Revenue" and "Source: finance ledger." in slides[1].text
    sheets = read_file(folder / "inventory.xlsx", "x")[0].sections
    assert [s.title for s in sheets] == ["Stock", "Suppliers"]
    # every row keeps its header
    assert "SKU: A-200; Item: Copper wire 2mm; Quantity: 340; Warehouse: Bristol." in (
        sheets[0].text)
    word = read_file(folder / "handbook.docx", "h")[0]
    assert [s.section for s in word.sections] == ["1", "2", "2.1", "3"]
    assert word.metadata["author"] == "Maria Lopez"
    book = read_file(folder / "tales.epub", "t")[0]
    assert book.metadata["author"] == "Rose Pell" and book.metadata["date"] == "1999-05-01"


def test_web_pages_keep_the_url_as_source_and_drop_the_boilerplate(kb, site) -> None:
    docs = {d.doc_id: d for d in kb.documents()}
    host = site.removeprefix("http://")
    news = docs[f"{host}/news.html"]
    assert news.source == f"{site}/news.html" and news.title == "Garden Club News"
    text = " ".join(s.text for s in kb.sections(news.doc_id))
    assert "village hall" in text and "Copyright" not in text and "About" not in text
    titles = [s.title for s in kb.sections(news.doc_id)]
    assert "Spring show" in titles and "Seed swap" in titles


def test_an_unreachable_url_is_named_with_its_reason(tmp_path, site) -> None:
    with KnowledgeBase.open(tmp_path / "kb", Settings()) as base:
        report = base.ingest([f"{site}/missing.html"], private_urls=True)
        refused = base.ingest([f"{site}/news.html"])  # loopback, not allowed
    assert report.added == 0
    assert report.failed and report.failed[0][0] == f"{site}/missing.html"
    assert "could not download" in report.failed[0][1]
    assert refused.added == 0 and "--private-urls" in refused.failed[0][1]


QUESTIONS = [("news.html", "When does the spring show take place?", "Spring show", "14 May"),
             ("rules.html", "How tall may sheds be on the allotments?", "Sheds", "two metres")]


def test_a_question_per_file_is_answered_citing_the_right_section(kb, samples, site) -> None:
    _, made = samples
    engine = Engine(kb, kb.settings.with_(model="offline"))
    host = site.removeprefix("http://")
    cases = [(s.name, s.question, s.section) for s in made]
    for page, question, title, _ in QUESTIONS:
        doc_id = f"{host}/{page}"
        section = next(s.section for s in kb.sections(doc_id) if s.title == title)
        cases.append((doc_id, question, section))
    misses = []
    for doc_id, question, section in cases:
        result = engine.ask(question)
        cited = {(c.doc_id, c.section) for c in result.citations}
        if result.status != RunStatus.ANSWERED or (doc_id, section) not in cited:
            misses.append((doc_id, question, result.status, sorted(cited), result.answer))
    assert not misses, misses


@pytest.mark.skipif(ocr_available(), reason="only without the extra ragloop[ocr]")
def test_without_ocr_a_scan_is_skipped_with_the_reason(samples) -> None:
    from ragloop.core.errors import ReaderError

    folder, _ = samples
    with pytest.raises(ReaderError, match=r"ragloop\[ocr\]"):
        read_file(folder / "lease-scan.pdf", "x")
