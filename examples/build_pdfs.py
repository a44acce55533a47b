# ruff: noqa: E501  (long lines are document text)
"""Build the PDF documents of the Halden Instruments example knowledge base.

Run from the repository root:

    .venv/bin/python examples/build_pdfs.py

The source text of every PDF lives in this file. Each PDF is written next to the
other documents of its folder under examples/kb/.

Two kinds of PDF are produced on purpose:

* ``outline`` documents carry a real PDF outline (bookmarks made with
  ``pdf.start_section``). Top-level bookmarks are sections "1", "2", ...; their
  children are "1.1", "1.2", ... . The document title at the top of page 1 has no
  bookmark, so text before the first bookmark is section "0".
* ``pages`` documents have no outline at all; their sections are pages "p1",
  "p2", ... . Each page is laid out explicitly and the script checks that no page
  overflows, so page numbers in the eval set stay valid.

Only Latin-1 characters are used (core Helvetica font), so the script needs no
font files and the text extracts cleanly with pypdf.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from fpdf import FPDF

KB = Path(__file__).resolve().parent / "kb"

AUTHOR = "Halden Instruments Ltd"

# ---------------------------------------------------------------------------
# Documents with an outline: (title, intro paragraphs, sections)
# sections: list of (heading, paragraphs, subsections); subsections: (heading, paragraphs)
# ---------------------------------------------------------------------------

Q4_FY2024 = {
    "path": "reports/fy2024-q4-sales.pdf",
    "title": "Quarterly Sales Report: Q4 FY2024",
    "intro": [
        "Halden Instruments Ltd, quarter ended 31 December 2024. Prepared by Group Finance "
        "for the Executive Committee and issued on 21 January 2025. Q4 FY2024 covers October "
        "to December 2024. All figures are unaudited and in pounds sterling.",
    ],
    "sections": [
        (
            "Summary",
            [
                "Total revenue in Q4 FY2024 was £14.6m, up 19% on Q4 FY2023. Gross margin was 59.6%. "
                "Full-year FY2024 revenue, based on the four quarterly sales reports, was £52.7m.",
            ],
            [
                (
                    "Highlights",
                    [
                        "Edge G2 had its strongest quarter since launch, driven by year-end orders from "
                        "European distributors. Northmoor Water extended its Pulse Enterprise deployment to "
                        "7,400 sensors. Pulse release 2024.11 added anomaly detection for gearboxes.",
                    ],
                ),
            ],
        ),
        (
            "Revenue by product line",
            [],
            [
                (
                    "S-series sensors",
                    [
                        "S-series sensor revenue in Q4 FY2024 was £7.3m. Units shipped were 10,800 S100 "
                        "sensors, 7,300 S200 sensors and 2,700 S300 sensors.",
                    ],
                ),
                (
                    "Edge G2 gateway",
                    [
                        "Edge G2 revenue in Q4 FY2024 was £2.9m. Halden shipped 1,630 Edge G2 gateways in "
                        "the quarter, including a large December order from a Rotterdam-based distributor.",
                    ],
                ),
                (
                    "Pulse platform",
                    [
                        "Pulse revenue in Q4 FY2024 was £4.4m. Pulse ARR at 31 December 2024 was £18.1m. "
                        "Pulse had 1,330 paying tenants at the end of the quarter. Pulse gross revenue "
                        "churn in Q4 FY2024 was 2.7%.",
                    ],
                ),
            ],
        ),
        (
            "Revenue by region",
            [],
            [
                ("UK and Ireland", ["Revenue from the UK and Ireland in Q4 FY2024 was £4.9m."]),
                (
                    "Europe",
                    [
                        "Revenue from continental Europe in Q4 FY2024 was £5.0m, making Europe the largest "
                        "region for the first time.",
                    ],
                ),
                ("North America", ["Revenue from North America in Q4 FY2024 was £3.8m."]),
                ("Rest of world", ["Revenue from the rest of the world in Q4 FY2024 was £0.9m."]),
            ],
        ),
        (
            "People",
            [
                "Group headcount at 31 December 2024 was 463 employees. The Austin office reached 51 "
                "employees. Voluntary attrition over the trailing twelve months was 9.1%.",
            ],
            [],
        ),
        (
            "Operations",
            [],
            [
                (
                    "Supply",
                    [
                        "Safety stock of Kestrel MEMS accelerometers was 15 weeks at the end of December "
                        "2024. The second-source MEMS qualification project remains on track for completion "
                        "in the fourth quarter of FY2025.",
                    ],
                ),
                (
                    "Quality",
                    [
                        "The field return rate for S-series sensors was 0.36% of units shipped in the "
                        "trailing twelve months.",
                    ],
                ),
            ],
        ),
        (
            "Outlook for Q1 FY2025",
            [
                "Management expects Q1 FY2025 revenue of £14.4m to £15.0m. The Kestrel Microsystems "
                "price increase of 6% on MEMS accelerometers takes effect on 1 January 2025.",
            ],
            [],
        ),
    ],
}

S300 = {
    "path": "products/s300-datasheet.pdf",
    "title": "S300 Hazardous-Area Vibration and Temperature Sensor Datasheet",
    "intro": [
        "Document HI-DS-S300, revision E, May 2025. The S300 is Halden's premium wireless "
        "condition monitoring sensor for critical machinery and hazardous areas such as "
        "refineries, chemical plants and offshore platforms.",
    ],
    "sections": [
        (
            "Overview",
            [
                "The S300 measures triaxial vibration with high bandwidth and surface temperature, and "
                "transmits over HaldenMesh or Bluetooth Low Energy to an Edge G2 gateway. The list "
                "price of the S300 is £545 per unit. The 4-20 mA loop-powered variant, part number "
                "HI-S300-LP, costs £610 per unit.",
            ],
            [
                (
                    "Typical applications",
                    [
                        "Typical applications include API 610 process pumps, compressors, steam turbines, "
                        "gearboxes and cooling water pumps in Zone 1 and Zone 2 hazardous areas.",
                    ],
                ),
                (
                    "Hazardous area certification",
                    [
                        "The S300 is certified for use in Zone 1 hazardous areas under ATEX and IECEx, "
                        "with the marking Ex ib IIC T4 Gb. The ATEX certificate number is Baseefa24ATEX0117X "
                        "and the IECEx certificate number is IECEx BAS 24.0052X.",
                    ],
                ),
            ],
        ),
        (
            "Measurement specifications",
            [],
            [
                (
                    "Vibration",
                    [
                        "The S300 uses a MEMS accelerometer with a measurement range of ±100 g. The "
                        "frequency response is 0.5 Hz to 10 kHz (±3 dB). The S300 captures FFT spectra of "
                        "up to 12,800 lines and raw waveforms of up to 65,536 samples.",
                    ],
                ),
                (
                    "Temperature",
                    [
                        "The surface temperature sensor measures from -40 °C to +150 °C with an accuracy of "
                        "±0.5 °C.",
                    ],
                ),
            ],
        ),
        (
            "Environmental specifications",
            [],
            [
                (
                    "Operating temperature",
                    [
                        "The operating temperature range of the S300 is -40 °C to +105 °C.",
                    ],
                ),
                (
                    "Ingress protection",
                    [
                        "The S300 enclosure has an ingress protection rating of IP68 under IEC 60529. The "
                        "S300 is tested for continuous immersion at a depth of 2 m for 24 hours. The S300 "
                        "also meets IP69K for high-temperature, high-pressure washdown.",
                    ],
                ),
                (
                    "Reliability",
                    [
                        "The S300 has a mean time between failures (MTBF) of 500,000 hours, calculated "
                        "under Telcordia SR-332 at 40 °C.",
                    ],
                ),
            ],
        ),
        (
            "Power",
            [],
            [
                (
                    "Battery",
                    [
                        "The S300 uses a replaceable 3.6 V lithium thionyl chloride D cell (19 Ah). Expected "
                        "battery life is 7 years at the default reporting interval of one reading every 10 "
                        "minutes with one FFT spectrum per day. The battery must only be replaced outside "
                        "the hazardous area, using battery pack HI-BAT-D19X.",
                    ],
                ),
                (
                    "Loop-powered variant",
                    [
                        "The HI-S300-LP variant is powered from a 4-20 mA current loop and has no battery. "
                        "The loop-powered variant requires Edge G2 firmware 2.5.0 or later.",
                    ],
                ),
            ],
        ),
        (
            "Radio and connectivity",
            [],
            [
                (
                    "Radio",
                    [
                        "The S300 supports HaldenMesh on 868 MHz or 915 MHz and Bluetooth Low Energy 5.2. "
                        "The typical line-of-sight HaldenMesh range to an Edge G2 gateway is 300 m. The S300 "
                        "requires Edge G2 firmware 2.2.0 or later.",
                    ],
                ),
                (
                    "Commissioning and pairing",
                    [
                        "The S300 is paired by NFC tap with the Halden Commission app, followed by entry of "
                        "the 8-digit install code printed on the sensor label. The install code prevents an "
                        "S300 from being paired by anyone without physical access to the label.",
                    ],
                ),
            ],
        ),
        (
            "Mechanical",
            [
                "The S300 weighs 260 g and measures 48 mm in diameter by 92 mm high. The housing is "
                "316L stainless steel. Mounting is by M8 or 1/4-28 UNF stud. An optional stainless "
                "steel protective cap, part number HI-S300-CAP, protects the sensor face from impact.",
            ],
            [],
        ),
    ],
}

# ---------------------------------------------------------------------------
# Documents without an outline: list of pages; each page is a list of blocks,
# ("h", text) for a bold heading line, ("p", text) for a paragraph.
# ---------------------------------------------------------------------------

EDGE_INSTALL = {
    "path": "products/edge-g2-installation-guide.pdf",
    "title": "Edge G2 Gateway Installation Guide",
    "pages": [
        [
            (
                "p",
                "Document HI-IG-EG2, revision B, November 2024. This guide describes how to plan, "
                "mount, connect and commission an Edge G2 gateway. Read the safety information "
                "before starting.",
            ),
            ("h", "Site survey"),
            (
                "p",
                "Before installation, walk the site with the Halden Commission app in Survey mode "
                "to measure radio signal strength at each planned sensor location. One Edge G2 "
                "gateway supports up to 250 sensors. Plan for a HaldenMesh RSSI of -95 dBm or "
                "better at every sensor.",
            ),
            ("h", "Choosing a mounting location"),
            (
                "p",
                "Mount the gateway at least 3 m above floor level, away from large metal "
                "obstructions and outside metal cabinets. Keep the gateway at least 1 m away from "
                "variable-speed drives and high-current cables. The gateway is not certified for "
                "hazardous areas and must be installed in a safe area; S300 sensors in a Zone 1 "
                "area can reach a gateway mounted outside the zone boundary.",
            ),
            ("h", "Safety information"),
            (
                "p",
                "Installation must be carried out by a competent person. Isolate the DC supply "
                "before connecting power terminals. When the gateway is mounted outdoors, use the "
                "supplied cable glands so that the IP66 rating of the enclosure is maintained.",
            ),
            ("h", "Tools required"),
            (
                "p",
                "You need a 4 mm hex key, a Phillips PH2 screwdriver, a drill with an 8 mm bit "
                "for wall plugs, and a laptop or phone with the Commission app.",
            ),
        ],
        [
            ("h", "Mounting and power"),
            (
                "p",
                "Fix the wall bracket with the four supplied M6 screws, then hang the gateway on "
                "the bracket and tighten the locking screw with the 4 mm hex key. For pole "
                "mounting use kit HI-EG2-PMK. Connect power either with a PoE+ (IEEE 802.3at) "
                "Ethernet cable on port LAN1 or with a 12-48 V DC supply on the green terminal "
                "block.",
            ),
            ("h", "Connecting to the network"),
            (
                "p",
                "Port LAN1 is the uplink port and uses DHCP by default. Wi-Fi and LTE are "
                "configured in the Commission app. To use LTE, insert a nano SIM in slot 1 before "
                "powering on; slot 2 is used for failover.",
            ),
            ("h", "First boot"),
            (
                "p",
                "On first boot the status LED flashes amber for about 90 seconds while the "
                "gateway starts. The LED turns solid green when the gateway has connected to "
                "Pulse. A flashing red LED means the gateway cannot reach Pulse; see the "
                "Connectivity Troubleshooting Guide.",
            ),
            ("h", "Claiming the gateway in Pulse"),
            (
                "p",
                "In Pulse, open Fleet > Gateways and select Claim gateway. Enter the 12-character "
                "claim code printed on the label inside the front cover. The claim code can be "
                "used only once. After the gateway is claimed it appears in the chosen site and "
                "sensors can be paired to it.",
            ),
        ],
        [
            ("h", "Manual firmware installation"),
            (
                "p",
                "Gateways at sites without internet access can be updated from a USB drive. "
                "Format a USB drive as FAT32 and copy the signed firmware file, named "
                "eg2-fw-<version>.hfw, to the root folder. Insert the drive into the USB port "
                "behind the front cover and hold the Function button for 3 seconds. The LED "
                "flashes blue during installation, which takes about 6 minutes, and the gateway "
                "restarts automatically. Do not remove power during installation.",
            ),
            ("h", "Factory reset"),
            (
                "p",
                "To return the gateway to factory settings, hold the recessed Reset button for "
                "15 seconds until the LED flashes white. A factory reset erases network settings "
                "and buffered readings but keeps the installed firmware and the device "
                "certificate. The gateway must be claimed again in Pulse after a reset.",
            ),
            ("h", "Local web page"),
            (
                "p",
                "The local web page is reached at https://192.168.50.1 from a laptop connected to "
                "port LAN2. The user name is the serial number and the password is the device "
                "password printed on the label.",
            ),
            ("h", "Loss of connection"),
            (
                "p",
                "If the connection to Pulse is lost, the Edge G2 buffers up to 14 days of "
                "readings in local storage and uploads them when the connection returns.",
            ),
            ("h", "Decommissioning"),
            (
                "p",
                "Before removing a gateway permanently, release it in Pulse under Fleet > "
                "Gateways so that its sensors can be reassigned, and return it through the RMA "
                "process if it is faulty.",
            ),
        ],
    ],
}

WARRANTY = {
    "path": "support/warranty-terms.pdf",
    "title": "Halden Hardware Warranty Terms",
    "pages": [
        [
            (
                "p",
                "These warranty terms apply to hardware sold by Halden Instruments Ltd, Halden "
                "Instruments B.V. and Halden Instruments Inc. on or after 1 April 2024. Version 3, "
                "April 2024.",
            ),
            ("h", "Warranty periods"),
            ("p", "The S100 sensor has a warranty period of 2 years from the date of delivery."),
            ("p", "The S200 sensor has a warranty period of 3 years from the date of delivery."),
            ("p", "The S300 sensor has a warranty period of 5 years from the date of delivery."),
            (
                "p",
                "The Edge G2 gateway has a warranty period of 3 years from the date of delivery.",
            ),
            (
                "p",
                "Batteries, mounting kits, magnets and other accessories have a warranty period "
                "of 12 months from the date of delivery. Battery life figures in product "
                "datasheets are typical values and are not warranted.",
            ),
            ("h", "What the warranty covers"),
            (
                "p",
                "Halden warrants that the hardware is free from defects in materials and "
                "workmanship and performs materially in accordance with its datasheet during the "
                "warranty period. A replacement or repaired unit is covered for the remainder of "
                "the original warranty period or 90 days, whichever is longer.",
            ),
            ("h", "Extended warranty"),
            (
                "p",
                "Customers may buy an extended warranty that adds 2 years to the warranty period "
                "of S200, S300 and Edge G2 hardware. The extended warranty costs 12% of the "
                "hardware list price and must be bought within 90 days of delivery.",
            ),
        ],
        [
            ("h", "Exclusions"),
            (
                "p",
                "The warranty does not cover damage caused by incorrect installation, mounting "
                "torque above the value in the quick start guide, use outside the operating "
                "temperature range, immersion beyond the ingress protection rating, lightning, "
                "chemical attack or unauthorised repair. The warranty does not cover hardware "
                "running firmware that was not supplied by Halden.",
            ),
            ("h", "Remedies"),
            (
                "p",
                "Halden will repair or replace a defective product at its choice. If repair or "
                "replacement is not possible, Halden will refund the purchase price. These "
                "remedies are the customer's sole remedies for breach of warranty.",
            ),
            ("h", "Making a claim"),
            (
                "p",
                "Warranty claims are made by requesting an RMA number through the support portal, "
                "as described in the Returns and RMA Policy. Halden pays return shipping for "
                "accepted warranty claims.",
            ),
            ("h", "Limitation of liability"),
            (
                "p",
                "Halden's total liability under these terms is limited to the price paid for the "
                "defective product. Halden is not liable for loss of production, loss of profit "
                "or consequential loss, except where such a limitation is not permitted by law.",
            ),
            ("h", "Governing law"),
            (
                "p",
                "These terms are governed by the laws of England and Wales for sales by Halden "
                "Instruments Ltd, the laws of the Netherlands for sales by Halden Instruments "
                "B.V., and the laws of the State of Texas for sales by Halden Instruments Inc.",
            ),
        ],
    ],
}

BENEFITS = {
    "path": "hr/employee-benefits-summary.pdf",
    "title": "Employee Benefits Summary 2025",
    "pages": [
        [
            (
                "p",
                "This summary describes the main benefits for employees of Halden Instruments in "
                "2025. Full details are in the benefits portal in Workday. Page 1 covers the "
                "United Kingdom; page 2 covers the Netherlands, the United States and benefits "
                "common to all employees.",
            ),
            ("h", "United Kingdom: holiday"),
            (
                "p",
                "UK employees receive 27 days of annual leave plus the 8 UK bank holidays. "
                "Annual leave rises by one day after 5 years of service, to a maximum of 30 days. "
                "Up to 5 unused days may be carried into the next year.",
            ),
            ("h", "United Kingdom: pension"),
            (
                "p",
                "The UK pension scheme is a defined contribution scheme with Aviva. Halden "
                "contributes 6% of salary when the employee contributes at least 4%.",
            ),
            ("h", "United Kingdom: health and insurance"),
            (
                "p",
                "UK employees receive private medical insurance with Bupa, including cover for "
                "a partner and children. Life assurance pays 4 times annual salary. Income "
                "protection pays 75% of salary after 26 weeks of absence.",
            ),
            ("h", "United Kingdom: other benefits"),
            (
                "p",
                "UK employees can join the cycle to work scheme and the electric vehicle salary "
                "sacrifice scheme. Free parking is available at Halden House in Leeds for car "
                "sharers.",
            ),
        ],
        [
            ("h", "Netherlands"),
            (
                "p",
                "Employees of Halden Instruments B.V. receive 26 days of annual leave plus Dutch "
                "public holidays, and a holiday allowance of 8% of annual salary paid in May. The "
                "pension scheme is provided by a.s.r. with an employer contribution of 7% of "
                "pensionable salary. Employees receive a travel allowance of EUR 0.23 per "
                "kilometre for commuting.",
            ),
            ("h", "United States"),
            (
                "p",
                "Employees of Halden Instruments Inc. receive 20 days of paid time off plus 10 US "
                "public holidays. Halden matches 401(k) contributions up to 5% of salary. Health "
                "insurance is provided by Blue Cross Blue Shield of Texas, and Halden pays 90% of "
                "the premium for employees and 70% for dependants.",
            ),
            ("h", "All employees: family leave"),
            (
                "p",
                "Primary carers receive 16 weeks of parental leave at full pay, and secondary "
                "carers receive 6 weeks at full pay, after 6 months of service.",
            ),
            ("h", "All employees: learning"),
            (
                "p",
                "Every employee has a personal learning budget of £1,000 per year, or the "
                "equivalent in local currency, for courses, books and conferences.",
            ),
            ("h", "All employees: share options"),
            (
                "p",
                "All permanent employees are invited to join the Halden share option plan after "
                "completing probation. Options vest over 4 years with a 1-year cliff.",
            ),
            ("h", "All employees: wellbeing"),
            (
                "p",
                "The employee assistance programme offers free, confidential counselling 24 "
                "hours a day in English and Dutch.",
            ),
        ],
    ],
}

OUTLINE_DOCS = [Q4_FY2024, S300]
PAGE_DOCS = [EDGE_INSTALL, WARRANTY, BENEFITS]


def _new_pdf(title: str) -> FPDF:
    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_author(AUTHOR)
    pdf.set_creator("examples/build_pdfs.py")
    # Fixed creation date so rebuilding gives identical files.
    pdf.set_creation_date(_dt.datetime(2025, 7, 1, tzinfo=_dt.UTC))
    pdf.set_margins(20, 20, 20)
    pdf.set_auto_page_break(auto=True, margin=20)
    return pdf


def _title(pdf: FPDF, title: str) -> None:
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)


def _para(pdf: FPDF, text: str) -> None:
    pdf.set_font("Helvetica", "", 10.5)
    pdf.multi_cell(0, 5.2, text, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2.5)


def _heading(pdf: FPDF, text: str, size: float) -> None:
    pdf.set_font("Helvetica", "B", size)
    pdf.multi_cell(0, 6.5, text, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(1)


def build_outline(doc: dict) -> Path:
    pdf = _new_pdf(doc["title"])
    pdf.add_page()
    _title(pdf, doc["title"])
    for p in doc["intro"]:
        _para(pdf, p)
    for heading, paras, subs in doc["sections"]:
        pdf.start_section(heading, level=0)
        _heading(pdf, heading, 13)
        for p in paras:
            _para(pdf, p)
        for sub_heading, sub_paras in subs:
            pdf.start_section(sub_heading, level=1)
            _heading(pdf, sub_heading, 11.5)
            for p in sub_paras:
                _para(pdf, p)
    out = KB / doc["path"]
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))
    return out


def build_pages(doc: dict) -> Path:
    pdf = _new_pdf(doc["title"])
    for i, page in enumerate(doc["pages"]):
        pdf.add_page()
        if i == 0:
            _title(pdf, doc["title"])
        for kind, text in page:
            if kind == "h":
                _heading(pdf, text, 11.5)
            else:
                _para(pdf, text)
        if pdf.page != i + 1:
            raise SystemExit(f"{doc['path']}: page {i + 1} overflowed; shorten it")
    out = KB / doc["path"]
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))
    return out


def main() -> None:
    for doc in OUTLINE_DOCS:
        print("outline", build_outline(doc).relative_to(KB))
    for doc in PAGE_DOCS:
        print("pages  ", build_pages(doc).relative_to(KB), f"({len(doc['pages'])} pages)")


if __name__ == "__main__":
    main()
