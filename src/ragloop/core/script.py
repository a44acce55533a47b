"""Writing systems, as characters: the one definition of CJK text and of the marks that end
a sentence. Here, at the bottom of the layers, because the index (retrieval/languages.py), the
streamed answer (core/answer_stream.py), the offline rules (language/text.py) and the eval
(eval/metrics.py) all read them.

Character classes are given as the inside of a regex `[...]`, so callers can combine them.
"""

from __future__ import annotations

import re

KANA = "\u3040-\u30ff"  # hiragana and katakana
# CJK ideographs: extension A, unified, compatibility
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
HANGUL = "\uac00-\ud7af"
HEBREW = "\u0590-\u05ff"
HEBREW_LETTERS = "\u05d0-\u05ea"  # alef to tav (no points or marks)
ARABIC = "\u0600-\u06ff"
CYRILLIC = "\u0400-\u04ff"
GREEK = "\u0370-\u03ff"
LATIN = "A-Za-z\u00c0-\u024f"  # with Latin-1 and Latin Extended-A/B letters

# CJK text: its runs become character bigrams on the index and the query side.
CJK_CHARS = KANA + HAN + HANGUL
# Scripts written without spaces between words (Chinese, Japanese; Korean has spaces): a
# reference answer in them is matched anywhere, and each character counts as a word.
UNSPACED_CHARS = KANA + HAN

# Chinese numerals (一 … 九, 十 百 千 万 亿, the zeros 零 〇, 两): a run of them is a figure.
HAN_NUMERALS = "零〇一二两三四五六七八九十百千万亿"

CJK = re.compile(f"[{CJK_CHARS}]")
UNSPACED = re.compile(f"[{UNSPACED_CHARS}]")

# The marks that end a sentence: the Latin ones, and the full-width ones of Chinese and
# Japanese (which need no space after them); the quotes and brackets that may close a
# sentence after its mark; the Hebrew sof pasuq.
LATIN_ENDS = ".!?"
FULL_WIDTH_ENDS = "。！？"
SENTENCE_ENDS = LATIN_ENDS + FULL_WIDTH_ENDS
QUESTION_MARKS = "?？"
FULL_WIDTH_CLOSERS = "”」』）"
SOF_PASUQ = "\u05c3"


def ends_question(text: str) -> bool:
    """`text` ends with a question mark, Latin or full-width (white space at its end
    ignored)."""
    return text.rstrip().endswith(tuple(QUESTION_MARKS))
