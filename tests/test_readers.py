"""Readers: section ids, title paths and texts per format; decoding; bad files."""

from __future__ import annotations

import json

import pytest

from ragloop.core.errors import ReaderError
from ragloop.ingest.readers import SUPPORTED_SUFFIXES, read_file, reader_for
from ragloop.ingest.readers.beir import BeirReader
from ragloop.ingest.readers.text import decode_bytes
from ragloop.ingest.sections import build_sections, explicit_number


def ids(doc):
    return [s.section for s in doc.sections]


def by_id(doc):
    return {s.section: s for s in doc.sections}


# ---------------------------------------------------------------- the shared section rule


@pytest.mark.parametrize(("heading", "number"), [
    ("4.2 Approval thresholds", "4.2"),
    ("4.2. Approval thresholds", "4.2"),
    ("Section 4.2 – Approval thresholds", "4.2"),
    ("§ 3 Scope", "3"),
    ("12) Annex", "12"),
    ("2024 Annual report", None),
    ("Approval thresholds", None),
    ("4.2kg limits", None),
])
def test_explicit_number(heading, number):
    assert explicit_number(heading) == number


def test_build_sections_positional_ids_title_paths_and_duplicates():
    title, sections = build_sections([
        (1, "Guide", "Welcome."),
        (2, "Intro", "intro body"),
        (3, "Background", "bg body"),
        (3, "Goals", ""),            # empty: dropped
        (4, "Short term", "st body"),  # keeps "Goals" in its title path
        (2, "4.2 Limits", "limits"),
        (2, "4.2 Limits again", "again"),
    ], preamble="Before the title.")
    assert title == "Guide"
    got = [(s.section, s.title_path, s.text) for s in sections]
    assert got == [
        ("0", ("Guide",), "Before the title.\n\nWelcome."),
        ("1", ("Guide", "Intro"), "intro body"),
        ("1.1", ("Guide", "Intro", "Background"), "bg body"),
        ("1.2.1", ("Guide", "Intro", "Goals", "Short term"), "st body"),
        ("4.2", ("Guide", "4.2 Limits"), "limits"),
        ("4.2-2", ("Guide", "4.2 Limits again"), "again"),
    ]


def test_build_sections_without_single_title_heading_uses_given_title():
    title, sections = build_sections([(1, "A", "a"), (1, "B", "b")], title="Doc")
    assert title == "Doc"
    assert [(s.section, s.title_path) for s in sections] == [
        ("1", ("Doc", "A")), ("2", ("Doc", "B"))]


# ---------------------------------------------------------------- markdown

MD = """---
title: Front matter title
---
# Travel and Expense Policy

This policy is *short*.

## 1 Scope
Applies to [all staff](https://example.com).

## Approvals

### 4.1 Booking
Book through the portal.

- first item
- second item

### 4.2. Approval thresholds
Above £2,500 the CFO approves.

| Amount | Approver |
|---|---|
| 2500 | CFO |

```
code stays
```

### Exceptions
None.

## Section 7 – Contacts
Ask finance.
"""


def test_markdown_heading_tree(tmp_path):
    path = tmp_path / "travel.md"
    path.write_text(MD, encoding="utf-8")
    [doc] = read_file(path, "policies/travel.md")
    assert doc.doc_id == "policies/travel.md"
    assert doc.title == "Travel and Expense Policy"
    assert doc.mime == "text/markdown"
    assert ids(doc) == ["0", "1", "4.1", "4.2", "2.3", "7"]
    s = by_id(doc)
    assert s["0"].title_path == ("Travel and Expense Policy",)
    assert s["0"].text == "This policy is short."
    assert s["1"].text == "Applies to all staff."
    assert s["4.1"].title_path == ("Travel and Expense Policy", "Approvals", "4.1 Booking")
    assert s["4.1"].text == "Book through the portal.\n\n- first item\n- second item"
    assert s["4.2"].title == "4.2. Approval thresholds"
    assert s["4.2"].text == ("Above £2,500 the CFO approves.\n\nAmount | Approver\n2500 | CFO"
                             "\n\ncode stays")
    assert s["2.3"].title_path == ("Travel and Expense Policy", "Approvals", "Exceptions")
    assert s["7"].title_path == ("Travel and Expense Policy", "Section 7 – Contacts")
    assert s["7"].text == "Ask finance."


def test_markdown_without_headings_uses_front_matter_or_file_name(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("---\ntitle: My notes\n---\nJust a paragraph.\n", encoding="utf-8")
    [doc] = read_file(path, "notes.md")
    assert doc.title == "My notes"
    assert [(s.section, s.title_path, s.text) for s in doc.sections] == [
        ("0", ("My notes",), "Just a paragraph.")]
    plain = tmp_path / "plain.md"
    plain.write_text("## A\nalpha\n\n## B\nbeta\n", encoding="utf-8")
    [doc] = read_file(plain, "plain.md")
    assert doc.title == "plain"
    assert [(s.section, s.title_path) for s in doc.sections] == [
        ("1", ("plain", "A")), ("2", ("plain", "B"))]


def test_markdown_of_only_headings_has_them_as_its_text(tmp_path):
    # a note of only headings is still searchable by its words (issue 28)
    path = tmp_path / "h.md"
    path.write_text("# Title\n\n## Empty\n", encoding="utf-8")
    [doc] = read_file(path, "h.md")
    assert [(s.section, s.text) for s in doc.sections] == [("0", "Title\nEmpty")]


# ---------------------------------------------------------------- html

HTML = """<!doctype html>
<html><head><title>T9 Sensor | Northwind</title>
<style>body { color: red }</style><script>var tracking = "SECRET";</script></head>
<body>
<header><a href="/">Northwind home</a></header>
<nav><ul><li>Products</li><li>Support</li></ul></nav>
<main>
<h1>T9 Sensor Datasheet</h1>
<p>The T9 is a <b>rugged</b>
   sensor.</p>
<h2>2 Environmental ratings</h2>
<p>IP67 rated.</p>
<ul><li>Dust tight</li><li>Water proof</li></ul>
<form><input name="q"><button>Search</button></form>
<h2>Power</h2>
<table><tr><th>Battery</th><th>Life</th></tr><tr><td>CR123A</td><td>5 years</td></tr></table>
<pre>line one
  line two</pre>
<aside>Related: T8 sensor</aside>
<noscript>Enable JS</noscript><svg><text>svg text</text></svg>
</main>
<footer>Copyright Northwind</footer>
</body></html>
"""


def test_html_sections_and_stripped_chrome(tmp_path):
    path = tmp_path / "sensor.html"
    path.write_text(HTML, encoding="utf-8")
    [doc] = read_file(path, "sensor.html")
    assert doc.title == "T9 Sensor | Northwind"
    assert doc.mime == "text/html"
    assert ids(doc) == ["0", "2", "3"]
    s = doc.sections
    assert s[0].title_path == ("T9 Sensor Datasheet",)
    assert s[0].text == "The T9 is a rugged sensor."
    assert s[1].title_path == ("T9 Sensor Datasheet", "2 Environmental ratings")
    assert s[1].text == "IP67 rated.\n\n- Dust tight\n- Water proof"
    assert s[2].title_path == ("T9 Sensor Datasheet", "Power")
    assert s[2].text == "Battery | Life\nCR123A | 5 years\n\nline one\n  line two"
    everything = doc.text + " ".join(t for x in s for t in x.title_path)
    for gone in ("SECRET", "color", "Northwind home", "Products", "Search", "Related",
                 "Enable JS", "svg text", "Copyright"):
        assert gone not in everything


def test_html_title_falls_back_to_first_h1(tmp_path):
    path = tmp_path / "page.htm"
    path.write_text("<h1>Heading One</h1><p>x</p><h1>Heading Two</h1><p>y</p>",
                    encoding="utf-8")
    [doc] = read_file(path, "page.htm")
    assert doc.title == "Heading One"
    assert [(s.section, s.title_path, s.text) for s in doc.sections] == [
        ("1", ("Heading One", "Heading One"), "x"),
        ("2", ("Heading One", "Heading Two"), "y"),
    ]


def test_html_with_only_scripts_is_an_error(tmp_path):
    path = tmp_path / "empty.html"
    path.write_text("<html><body><script>x()</script><nav>menu</nav></body></html>",
                    encoding="utf-8")
    with pytest.raises(ReaderError, match="no text"):
        read_file(path, "empty.html")


# ---------------------------------------------------------------- pdf


def _pdf(path, outline: bool):
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.set_title("Claims Handbook")

    def write(text):
        pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    if outline:
        pdf.start_section("Claims Handbook", level=0)
    write("Claims Handbook\nThis handbook explains claims.")
    pdf.add_page()
    if outline:
        pdf.start_section("1 Filing a claim", level=1)
    write("1 Filing a claim\nFile within 30 days of the loss.")
    if outline:
        pdf.start_section("Payment", level=1)
    write("Payment\nPayment follows within 10 working days.")
    pdf.add_page()
    if outline:
        pdf.start_section("2.1 Bank details", level=2)
    write("2.1 Bank details\nWe pay by bank transfer only.")
    pdf.output(str(path))
    return path


def test_pdf_with_outline(tmp_path):
    [doc] = read_file(_pdf(tmp_path / "claims.pdf", outline=True), "claims.pdf")
    assert doc.title == "Claims Handbook"
    assert doc.mime == "application/pdf"
    assert [(s.section, s.title_path, s.text) for s in doc.sections] == [
        ("0", ("Claims Handbook",), "This handbook explains claims."),
        ("1", ("Claims Handbook", "1 Filing a claim"), "File within 30 days of the loss."),
        ("2", ("Claims Handbook", "Payment"), "Payment follows within 10 working days."),
        ("2.1", ("Claims Handbook", "Payment", "2.1 Bank details"),
         "We pay by bank transfer only."),
    ]


def test_pdf_bookmark_on_the_wrong_page_or_missing_from_the_text(tmp_path):
    """A bookmark that points at the page before its heading (a page break pushed the heading
    on), and one whose title is nowhere in the text: neither takes a neighbour's text."""
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    pdf.set_font("Helvetica", size=12)

    def write(text):
        pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    pdf.start_section("Battery", level=0)
    write("Battery\nThe unit uses a 3.6 V lithium cell.")
    pdf.start_section("Loop-powered variant", level=0)  # bookmark on page 1 ...
    pdf.add_page()  # ... heading on page 2
    write("Loop-powered variant\nThe LP variant is powered from a 4-20 mA loop.")
    pdf.start_section("Appendix Z", level=0)  # title never written
    write("Spares\nOrder spares by part number.")
    pdf.output(str(tmp_path / "sheet.pdf"))
    [doc] = read_file(tmp_path / "sheet.pdf", "sheet.pdf")
    texts = {s.title_path[-1]: s.text for s in doc.sections}
    assert texts["Battery"] == "The unit uses a 3.6 V lithium cell."
    assert texts["Loop-powered variant"] == ("The LP variant is powered from a 4-20 mA loop.\n"
                                             "Spares\nOrder spares by part number.")
    assert "Appendix Z" not in texts


def test_pdf_without_outline_has_one_section_per_page(tmp_path):
    [doc] = read_file(_pdf(tmp_path / "claims.pdf", outline=False), "claims.pdf")
    assert ids(doc) == ["p1", "p2", "p3"]
    s = by_id(doc)
    assert s["p1"].title_path == ("Claims Handbook", "Page 1")
    assert s["p2"].text == ("1 Filing a claim\nFile within 30 days of the loss.\n"
                            "Payment\nPayment follows within 10 working days.")
    assert s["p3"].text == "2.1 Bank details\nWe pay by bank transfer only."


def test_corrupt_truncated_and_encrypted_pdfs(tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n%%EOF\n")
    with pytest.raises(ReaderError, match="unreadable PDF"):
        read_file(bad, "bad.pdf")
    good = _pdf(tmp_path / "good.pdf", outline=False)
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(good.read_bytes()[:500])
    with pytest.raises(ReaderError):
        read_file(cut, "cut.pdf")
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=str(good))
    writer.encrypt("secret", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    writer.write(str(locked))
    with pytest.raises(ReaderError, match="encrypted"):
        read_file(locked, "locked.pdf")


# ---------------------------------------------------------------- plain text


def test_text_numbered_headings(tmp_path):
    path = tmp_path / "policy.txt"
    path.write_text(
        "Expense Policy\n\n"
        "1. Scope\nApplies to everyone.\n\n"
        "2. Approvals\n\n"
        "2.1 Booking\nBook early.\n\n"
        "Steps:\n\n1. Open the portal\n2. Pick a flight\n\n"
        "Section 3 – Claims\nClaim within 30 days.\n",
        encoding="utf-8")
    [doc] = read_file(path, "policy.txt")
    assert doc.title == "Expense Policy"
    assert [(s.section, s.title_path, s.text) for s in doc.sections] == [
        ("1", ("Expense Policy", "1. Scope"), "Applies to everyone."),
        ("2.1", ("Expense Policy", "2. Approvals", "2.1 Booking"),
         "Book early.\n\nSteps:\n\n1. Open the portal\n2. Pick a flight"),
        ("3", ("Expense Policy", "Section 3 – Claims"), "Claim within 30 days."),
    ]


def test_text_without_headings_is_one_section(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("12:00 started.\n12:01 request served.\n", encoding="utf-8")
    [doc] = read_file(path, "server.log")
    assert doc.title == "server"
    assert [(s.section, s.title_path, s.text) for s in doc.sections] == [
        ("0", ("server",), "12:00 started.\n12:01 request served.")]


# ---------------------------------------------------------------- decoding and bad files


def test_cp1252_and_latin1_text_is_decoded(tmp_path):
    path = tmp_path / "menu.txt"
    path.write_bytes("Prices\n\nA café costs £3 – “cheap”.\n".encode("cp1252"))
    [doc] = read_file(path, "menu.txt")
    assert doc.sections[0].text == "A café costs £3 – “cheap”."
    # 0x81 is undefined in cp1252: latin-1 still keeps the file
    assert decode_bytes(b"caf\xe9 \x81 ok") == "caf\xe9 \x81 ok"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-8-sig", "utf-32"])
def test_bom_encodings(tmp_path, encoding):
    path = tmp_path / "bom.md"
    data = "# Café\n\nNaïve £5 text.\n".encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path.write_bytes(data)
    [doc] = read_file(path, "bom.md")
    assert doc.title == "Café"
    assert doc.sections[0].text == "Naïve £5 text."


@pytest.mark.parametrize("content", [b"", b"   \n\t\n", "  \n".encode("utf-16")])
def test_empty_files(tmp_path, content):
    for name in ("e.md", "e.txt", "e.html", "e.pdf", "e.jsonl"):
        path = tmp_path / name
        path.write_bytes(content)
        if name == "e.pdf" and content:
            with pytest.raises(ReaderError):
                read_file(path, name)
            continue
        with pytest.raises(ReaderError, match="empty file"):
            read_file(path, name)


def test_binary_files_are_named_binary(tmp_path):
    png = tmp_path / "image.md"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    with pytest.raises(ReaderError, match=r"binary.*PNG"):
        read_file(png, "image.md")
    nul = tmp_path / "blob.txt"
    nul.write_bytes(b"hello\x00world" * 100)
    with pytest.raises(ReaderError, match=r"binary.*NUL"):
        read_file(nul, "blob.txt")
    noise = tmp_path / "noise.txt"
    noise.write_bytes(bytes(b for b in range(1, 256) if b not in (9, 10, 13, 32)) * 20)
    with pytest.raises(ReaderError, match="binary"):
        read_file(noise, "noise.txt")


def test_registry(tmp_path):
    assert {".md", ".markdown", ".txt", ".text", ".log", ".html", ".htm", ".pdf",
            ".jsonl"} <= SUPPORTED_SUFFIXES
    assert reader_for(tmp_path / "A.MD") is not None
    # office, e-book, table and image files have readers of their own (tests/test_formats.py)
    assert {".docx", ".pptx", ".xlsx", ".csv", ".epub", ".png"} <= SUPPORTED_SUFFIXES
    assert reader_for(tmp_path / "x.odt") is None
    odd = tmp_path / "x.xyz"
    odd.write_text("hi", encoding="utf-8")
    with pytest.raises(ReaderError, match="unsupported"):
        read_file(odd, "x.xyz")
    with pytest.raises(ReaderError, match="cannot read"):
        read_file(tmp_path / "missing.md", "missing.md")


# ---------------------------------------------------------------- BEIR corpus


def test_beir_corpus_with_a_broken_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [json.dumps({"_id": "4983", "title": "White matter", "text": "Diffusion MRI."}),
            '{"_id": "broken", "text": ',
            json.dumps({"_id": 17, "title": "", "text": "Numeric id\u2028with a separator."}),
            json.dumps({"title": "no id", "text": "x"}),
            ""]
    path.write_text("\n".join(rows), encoding="utf-8")
    reader = BeirReader()
    docs = reader.read(path, "ignored")
    assert reader.last_skipped == 2
    assert read_file(path, "ignored") == docs
    assert [d.doc_id for d in docs] == ["4983", "17"]
    first, second = docs
    assert first.title == "White matter"
    assert [(s.section, s.title_path, s.text) for s in first.sections] == [
        ("0", ("White matter",), "Diffusion MRI.")]
    assert second.sections[0].text == "Numeric id\u2028with a separator."


def test_beir_folder_queries_are_not_documents(tmp_path):
    row = json.dumps({"_id": "q1", "text": "Which band released Tinted Windows?"})
    queries = tmp_path / "queries.jsonl"
    queries.write_text(row + "\n", encoding="utf-8")
    # alone, a {_id, text} file is a corpus; beside a corpus.jsonl it is the questions
    assert [d.doc_id for d in read_file(queries, "queries.jsonl")] == ["q1"]
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "Tinted Windows", "text": "An album."}) + "\n",
        encoding="utf-8")
    with pytest.raises(ReaderError, match="questions of a BEIR dataset"):
        read_file(queries, "queries.jsonl")


def test_beir_detection_and_all_broken(tmp_path):
    other = tmp_path / "docs.jsonl"
    other.write_text('not json\n{"_id": "a", "title": "A", "text": "alpha"}\n', encoding="utf-8")
    assert [d.doc_id for d in read_file(other, "docs.jsonl")] == ["a"]
    notbeir = tmp_path / "events.jsonl"
    notbeir.write_text('{"event": 1}\n', encoding="utf-8")
    with pytest.raises(ReaderError, match="not a BEIR"):
        read_file(notbeir, "events.jsonl")
    broken = tmp_path / "corpus.jsonl"
    broken.write_text('{"_id": \n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ReaderError, match="2 bad"):
        read_file(broken, "corpus.jsonl")


def test_markdown_heading_attribute_lists_are_not_title_words(tmp_path):
    # MkDocs pages write "## Title { #anchor }" (attr_list): the anchor is markup; a brace
    # that is the title's own text stays
    path = tmp_path / "status.md"
    path.write_text("# Response - Change Status Code { #response-change-status-code }\n"
                    "Intro.\n\n## Use a `Response` parameter {.big #use}\nBody.\n\n"
                    "## Sets {a, b}\nText.\n", encoding="utf-8")
    [doc] = read_file(path, "status.md")
    assert doc.title == "Response - Change Status Code"
    assert [s.title_path[-1] for s in doc.sections] == [
        "Response - Change Status Code", "Use a Response parameter", "Sets {a, b}"]
