"""Real-looking files of each format, made here with the libraries that write them (python-docx,
python-pptx, openpyxl, fpdf2, Pillow, zipfile): the samples of tests/test_formats.py and
benchmarks/readers.py. Each comes with a question whose answer is in one section of it."""

from __future__ import annotations

import csv
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    name: str  # the file (doc_id) in the folder
    question: str
    section: str  # the section id whose text answers it
    answer: str  # words the cited section holds


def make_docx(path: Path) -> Sample:
    import docx

    d = docx.Document()
    d.core_properties.title = "Warehouse Handbook"
    d.core_properties.author = "Maria Lopez"
    d.add_heading("Warehouse Handbook", 0)
    d.add_heading("1 Receiving", 1)
    d.add_paragraph("Pallets are received at dock 3 between 06:00 and 14:00.")
    d.add_heading("2 Forklift safety", 1)
    d.add_paragraph("Forklift drivers must renew their licence every 24 months.")
    d.add_heading("2.1 Load limits", 2)
    d.add_paragraph("The rated loads of the forklift fleet:")
    table = d.add_table(rows=3, cols=2)
    for row, values in zip(table.rows, [("Model", "Rated load"), ("Linde H25", "2,500 kg"),
                                        ("Toyota 8FBE", "1,800 kg")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    d.add_heading("3 Returns", 1)
    d.add_paragraph("Returned goods wait in cage R for inspection within two working days.")
    d.save(str(path))
    return Sample(path.name, "What is the rated load of the Linde H25 forklift?", "2.1",
                  "2,500 kg")


def make_pptx(path: Path) -> Sample:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.title = "Q3 Sales Review"
    slides = [("Q3 Sales Review", "Prepared by the sales operations team."),
              ("Revenue", "Q3 revenue reached 4.2 million euros, up 8% on Q2."),
              ("Top region", "The Nordics region grew fastest, at 21% year on year."),
              ("Churn", "Customer churn fell to 3.1% after the loyalty programme."),
              ("Next steps", "Hire two account managers for the Benelux market.")]
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.slides[1].shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(1)
                                      ).text_frame.text = "Source: finance ledger."
    deck.save(str(path))
    return Sample(path.name, "Which region grew fastest in Q3?", "s3", "Nordics")


def make_xlsx(path: Path) -> Sample:
    import openpyxl

    book = openpyxl.Workbook()
    stock = book.active
    stock.title = "Stock"
    for row in [("SKU", "Item", "Quantity", "Warehouse"), ("A-100", "Steel bolts M8", 12000,
                "Leeds"), ("A-200", "Copper wire 2mm", 340, "Bristol"),
                ("A-300", "Rubber gaskets", 5600, "Leeds")]:
        stock.append(row)
    suppliers = book.create_sheet("Suppliers")
    for row in [("Supplier", "Country", "Lead time (days)"), ("Kovac Metals", "Slovenia", 12),
                ("Tanaka Cable", "Japan", 35), ("Brennan Rubber", "Ireland", 9)]:
        suppliers.append(row)
    book.properties.title = "Inventory 2024"
    book.save(str(path))
    return Sample(path.name, "What is the lead time of Tanaka Cable?", "sheet2", "35")


def make_csv(path: Path) -> Sample:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Employee", "Department", "Office", "Start year"])
        w.writerow(["Ines Duarte", "Legal", "Lisbon", 2017])
        w.writerow(["Tom Becker", "Finance", "Berlin", 2020])
        w.writerow(["Aiko Sato", "Research", "Osaka", 2015])
    return Sample(path.name, "Which office does Aiko Sato work in?", "1", "Osaka")


def make_epub(path: Path) -> Sample:
    chapters = [("ch1.xhtml", "<h1>Chapter 1: The Harbour</h1><p>The lighthouse keeper"
                 " lit the lamp at dusk every evening.</p>"),
                ("ch2.xhtml", "<h1>Chapter 2: The Storm</h1><p>The storm of 1887 sank the"
                 " schooner Margaret Ellen off Puffin Rock.</p>")]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/'
                   'content.opf" media-type="application/oebps-package+xml"/></rootfiles>'
                   "</container>")
        items = "".join(f'<item id="c{i}" href="{n}" media-type="application/xhtml+xml"/>'
                        for i, (n, _) in enumerate(chapters))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        z.writestr("OEBPS/content.opf",
                   '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf"'
                   ' version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/'
                   'dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier><dc:title>Tales'
                   " of the Coast</dc:title><dc:creator>Rose Pell</dc:creator><dc:date>"
                   f"1999-05-01</dc:date></metadata><manifest>{items}</manifest><spine>"
                   f"{spine}</spine></package>")
        for name, body in chapters:
            z.writestr(f"OEBPS/{name}", '<?xml version="1.0"?><html xmlns="http://www.w3.org/'
                       f'1999/xhtml"><head><title>{name}</title></head><body>{body}</body>'
                       "</html>")
    return Sample(path.name, "Which schooner sank off Puffin Rock?", "2", "Margaret Ellen")


def make_scanned_pdf(path: Path) -> Sample:
    """A page rendered from text to an image and saved as an image-only PDF (no text layer)."""
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("RGB", (1240, 1754), "white")  # A4 at 150 dpi
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=30)  # 14 pt at 150 dpi
    lines = ["LEASE AGREEMENT", "", "The tenant shall pay a monthly rent of 1,450 pounds",
             "on the first day of each month.", "", "The deposit is held by Harbour Lettings",
             "and returned within 30 days of the end of the lease."]
    for i, line in enumerate(lines):
        draw.text((120, 160 + i * 50), line, fill="black", font=font)
    page.save(str(path), "PDF", resolution=150)
    return Sample(path.name, "What is the monthly rent in the lease agreement?", "p1", "1,450")


def make_table_pdf(path: Path) -> Sample:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(0, 10, "Laboratory test results", new_x="LMARGIN", new_y="NEXT")
    rows = [("Sample", "Lead (ppb)", "Nitrate (mg/L)"), ("Well A", "3", "12"),
            ("Well B", "17", "4"), ("Tap C", "1", "9")]
    with pdf.table() as table:
        for values in rows:
            row = table.row()
            for v in values:
                row.cell(v)
    pdf.output(str(path))
    return Sample(path.name, "What is the lead level of Well B?", "p1", "| Well B | 17 | 4 |")


PAGE = """<!doctype html><html><head><title>Garden Club News</title>
<meta name="author" content="Evan Price"><meta name="date" content="2024-04-02"></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>Garden Club News</h1>
<h2>Spring show</h2><p>The spring show takes place on 14 May in the village hall, with
prizes for the best tulips and the heaviest marrow grown by a member of the club.</p>
<h2>Seed swap</h2><p>The seed swap moves to the library garden on Saturday mornings, where
members bring spare seeds in labelled paper envelopes and take home what they need.</p>
</article><footer>Copyright Garden Club</footer></body></html>"""


def make_files(folder: Path) -> list[Sample]:
    folder.mkdir(parents=True, exist_ok=True)
    return [make_docx(folder / "handbook.docx"), make_pptx(folder / "sales.pptx"),
            make_xlsx(folder / "inventory.xlsx"), make_csv(folder / "staff.csv"),
            make_epub(folder / "tales.epub"), make_scanned_pdf(folder / "lease-scan.pdf"),
            make_table_pdf(folder / "lab.pdf")]
