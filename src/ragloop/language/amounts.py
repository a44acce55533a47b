"""Numbers as written: the one reading of an amount's digits and of thousands separators, for
the offline rules' quantities (language/text.py), the citation support check
(language/support.py) and the eval's answer matching (eval/metrics.py)."""

from __future__ import annotations

import re

# The digits of an amount in running text, grouped by commas, with a decimal point: "2,500",
# "2500.50", "3" (the group that `Reading.quantities` reads after a currency sign or code).
AMOUNT = r"(\d(?:[\d,]*\d)?(?:\.\d+)?)"
# A thousands separator: a comma, a point, a (narrow) no-break space or an apostrophe between
# a digit and exactly three more ("3,350", "3.350", "3 350", "3'350"), as the languages write them.
THOUSANDS = re.compile(r"(?<=\d)[,.\u00a0\u202f'’](?=\d{3}(?!\d))")
# A figure: a number, not the digits of a code (S200, FY2025, E104).
FIGURE = re.compile(r"(?<![A-Za-z\d.])\d+(?:\.\d+)?")


def amount_value(digits: str) -> float:
    """The value of AMOUNT's digits: "2,500" → 2500.0, "12.5" → 12.5."""
    return float(digits.replace(",", ""))


def without_thousands(text: str) -> str:
    """`text` with its thousands separators taken out: "3.350 km" → "3350 km"."""
    return THOUSANDS.sub("", text)
