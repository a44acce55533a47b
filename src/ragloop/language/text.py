"""Text helpers shared by the local (no-LLM) decision makers.

Sentence splitting, content terms with the language's stemmer (`Reading.stem`), entity-like
tokens (product codes, error codes, quarters, years, capitalised names), quantities (money,
percentages, dates, durations) and section references. Pure functions, no model; those that
read a language's words are methods of a `Reading`, built for the knowledge base's language
and passed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache

from ragloop.core import script
from ragloop.core.types import Hit
from ragloop.language.amounts import AMOUNT as _AMOUNT
from ragloop.language.amounts import amount_value
from ragloop.language.vocabulary import Vocabulary, alternation, vocabulary
from ragloop.retrieval.languages import (
    CJK_CHARS,
    ENGLISH,
    MIXED,
    cjk_grams,
    get_language,
    month_names,
    month_pattern,
    script_stop_words,
    stop_words,
)

# A word is a run of letters and digits of one kind of script: Hebrew, Arabic and CJK runs
# (CJK becomes character bigrams in words()) apart from every other script's, whose letters
# (città, Müller, Αθήνα, Москва) join with ASCII ones, hyphens and apostrophes into one word.
_OTHER_SCRIPT = script.HEBREW + script.ARABIC + CJK_CHARS
_LETTER = f"[^\\W_{_OTHER_SCRIPT}]"
# (runs of letters between runs of joiners: one step per run, not one alternation per letter)
_WORD = re.compile(rf"\d+(?:[.,]\d+)+|{_LETTER}+(?:[\-'’]+{_LETTER}*)*"
                   f"|[{_OTHER_SCRIPT}][{_OTHER_SCRIPT}\"'׳״]*")
_CJK_ONLY = re.compile(f"^[{CJK_CHARS}]+$")
# A token with a digit next to letters: S200, E104, Q3, FY2025, G2, IP67, SR-332.
_CODE = re.compile(r"^(?=.*\d)(?=.*[a-z])[a-z0-9\-]+$", re.IGNORECASE)
_YEAR = re.compile(r"^(?:19|20)\d\d$")



# A dash other than "-" joining two words (Norse–Gaels): read as a hyphen.
_WORD_DASH = re.compile(r"(?<=[^\W\d_])[\u2010-\u2015\u2212](?=[^\W\d_])")


def fold_dashes(text: str) -> str:
    """"Norse–Gaels" → "Norse-Gaels": titles and texts spell compounds with either dash."""
    return _WORD_DASH.sub("-", text) if text else text


def words(text: str) -> list[str]:
    """The word tokens of `text` (codes like S200 or SR-332 stay whole), original case."""
    out = []
    for w in _WORD.findall(fold_dashes(text or "")):
        if _CJK_ONLY.match(w):  # no spaces between Chinese/Japanese words: bigrams
            out.extend(cjk_grams(w))
            continue
        w = w.strip("-'’\"׳״")
        if w.lower().endswith(("'s", "’s")):
            w = w[:-2]
        if w:
            out.append(w)
    return out






def is_number(word: str) -> bool:
    return bool(re.fullmatch(r"\d[\d,.]*", word))


@lru_cache(maxsize=65536)
def light_stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed, -ly, -ation, a final -e. Codes and
    numbers are returned lower-cased and otherwise untouched (they must match exactly)."""
    w = word.lower().replace("’", "'")
    if any(c.isdigit() for c in w) or len(w) <= 3:
        return w
    for suffix, repl in (("ational", "ate"), ("ization", "ize"), ("isation", "ize"),
                         ("ations", "ate"), ("ation", "ate"), ("ments", ""), ("ment", ""),
                         ("ness", ""), ("ities", ""), ("ity", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            w = w[: -len(suffix)] + repl
            break
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    for suffix in ("ing", "ed", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if w.endswith("y") and len(w) > 3:
        w = w[:-1] + "i"
    return w




# The light stemmer's name as a Reading's `stemmer`; any other name is a tantivy Snowball
# stemmer (`tantivy.Filter.stemmer`), None reads words lower-cased and nothing more.
LIGHT = "light"


@cache
def _snowball(name: str):  # -> tantivy.TextAnalyzer
    import tantivy

    # the raw tokenizer: the word is one token, so the stemmer sees it whole (the index's
    # chain, retrieval/languages.analyzer, lower-cases before its stemmer as this does)
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer(name)).build())


@lru_cache(maxsize=262144)
def snowball_stem(name: str, word: str) -> str:
    """`word` through the index's Snowball stemmer `name` ("italian"), so a rule conflates the
    words the index does. Codes, numbers and words of three letters or fewer are lower-cased
    only, as the light stemmer leaves them (they must match exactly)."""
    w = word.lower().replace("’", "'")
    if any(c.isdigit() for c in w) or len(w) <= 3:
        return w
    out = _snowball(name).analyze(w)
    return out[0] if len(out) == 1 and out[0] else w


def stemmer_of(code: str | None) -> str | None:
    """The stemmer the offline rules read a language with: the index's own Snowball stemmer
    where tantivy has one for it, none for Chinese, Japanese and Korean (their analyzer reads
    bigrams, no word endings to strip), and the light English one for English (tantivy's
    English Snowball measured worse there, offline/README.md) and for a KB whose language has
    neither (Hebrew, "mixed": as before). `benchmarks/offline_rules.py light-stem` reads every
    language with the light one, as before issue 42."""
    lang = get_language(code)
    if lang.code != ENGLISH and lang.stemmer:
        return lang.stemmer
    if lang.bigrams and lang.code != MIXED:
        return None
    return LIGHT








# "7-hour", "30-day": a number with its unit, not a code the sources must name.
_MEASURE = re.compile(r"^\d+-[a-z]+$", re.IGNORECASE)




def code_family(code: str) -> str:
    """The letter prefix of a code: S200 -> "S", FY2025 -> "FY", E104 -> "E"."""
    m = re.match(r"[A-Za-z\-]*", code)
    return (m.group(0) if m else "").upper().strip("-")


# --- sentences ---------------------------------------------------------------------------

# ". " before a capital (or a digit, a currency), as in English; ". " before a Hebrew letter
# (Hebrew has no capitals); after 。！？ (and a closing quote), with or without a space; sof pasuq.
_LATIN, _FULL, _CLOSE = script.LATIN_ENDS, script.FULL_WIDTH_ENDS, script.FULL_WIDTH_CLOSERS
_SENTENCE_END = re.compile(rf"(?<=[{_LATIN}])\s+(?=[\"'(\[]?[A-Z0-9£$€{script.HEBREW_LETTERS}])"
                           rf"|(?<=[{_FULL}])(?![{_CLOSE}])\s*|(?<=[{_FULL}][{_CLOSE}])\s*"
                           rf"|(?<={script.SOF_PASUQ})\s*")
# Where a capitalised word is read as a sentence's first (not a name): after a Latin sentence
# end, a colon or a line break, within the three characters before it.
_SENTENCE_START = re.compile(rf"[{_LATIN}:\n]\s*$")


def _starts_sentence(text: str, at: int) -> bool:
    """The word at `at` opens a sentence (`_SENTENCE_START`)."""
    return _SENTENCE_START.search(text[max(0, at - 3):at]) is not None




# --- quantities (for conflicts) ----------------------------------------------------------

@dataclass(frozen=True)
class Quantity:
    kind: str  # "money:£", "percent", "date", "year", "duration:month", "number:unit"
    value: str  # normalised value
    text: str  # as written




def _date(months: str) -> re.Pattern[str]:
    """ "5 Sept 2024", "Sep 9, 2024", "2024-10-01", with a language's month names."""
    return re.compile(rf"\b(?:(\d{{1,2}})\s+({months})\.?,?\s+((?:19|20)\d\d)"
                      rf"|({months})\.?\s+(\d{{1,2}}),?\s+((?:19|20)\d\d)"
                      r"|((?:19|20)\d\d)-(\d\d)-(\d\d))\b")


# --- section references ------------------------------------------------------------------

@dataclass(frozen=True)
class SectionRef:
    section: str  # "4.2"
    doc_title: str | None = None  # "Data Retention Policy" when the text names the document
    text: str = ""






def looks_cut_off(hit: Hit | str) -> bool:
    """True when a chunk stops mid-sentence or on a colon (a list follows): the rest is in
    the section, so fetching the whole section is worthwhile."""
    text = (hit.text if isinstance(hit, Hit) else hit or "").rstrip()
    if not text:
        return False
    if text.endswith((":", ",", ";", "-", "–", "—", "(")):
        return True
    last_line = text.splitlines()[-1].strip()
    if last_line.startswith(("#", "|", "-", "*", "•")) or re.match(r"\d+[.)]\s", last_line):
        return False  # a heading, table row or list item ends without a full stop
    return not re.search(rf"[{_LATIN}…\"')\]»”’]$", text)


# --- names of documents ------------------------------------------------------------------

_NAME_TOKEN = re.compile(r"[^\W_]+(?:['’.\-&][^\W_]+)*\.?|&")
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
MAX_TITLE_TOKENS = 8


def name_tokens(text: str) -> list[str]:
    """Lower-cased word tokens for title matching ("Riverton, New York" → riverton new york)."""
    return [t.lower().rstrip(".") for t in _NAME_TOKEN.findall(fold_dashes(text or ""))]


class TitleIndex:
    """Document titles, for finding the documents a text names ("… formed in Tulsa,
    Oklahoma" names the document titled "Tulsa, Oklahoma"). A title's trailing
    disambiguation ("Tinted Windows (album)") is ignored, so one name may mean several
    documents. Titles that are a single stop word or a number are not indexed."""

    def __init__(self, titles: Iterable[tuple[str, str]],  # (doc_id, title)
                 reading: Reading) -> None:
        self.by_name: dict[tuple[str, ...], list[str]] = {}
        stop = reading.rules.stop
        for doc_id, title in titles:
            key = tuple(name_tokens(_DISAMBIGUATION.sub("", title or "")))
            if not key or len(key) > MAX_TITLE_TOKENS:
                continue
            if len(key) == 1 and (key[0] in stop or key[0].isdigit() or len(key[0]) < 3):
                continue
            self.by_name.setdefault(key, []).append(doc_id)
        self.longest = max((len(k) for k in self.by_name), default=0)

    def __len__(self) -> int:
        return len(self.by_name)

    def named(self, text: str) -> list[str]:
        """doc_ids whose title `text` names as a capitalised phrase, in order of first
        mention; the longest title wins at each position ("New York City" over "New York")."""
        matches = list(_NAME_TOKEN.finditer(fold_dashes(text or "")))
        toks = [m.group(0).lower().rstrip(".") for m in matches]
        out: list[str] = []
        i = 0
        while i < len(toks):
            first = matches[i].group(0)
            if not (first[:1].isupper() or first[:1].isdigit()):
                i += 1
                continue
            for n in range(min(self.longest, len(toks) - i), 0, -1):
                docs = self.by_name.get(tuple(toks[i:i + n]))
                if docs:
                    out.extend(d for d in docs if d not in out)
                    i += n
                    break
            else:
                i += 1
        return out


_SPAN_TOKEN = re.compile(r"[^\W_][\w\-'’.&]*")






# --- one language's patterns -------------------------------------------------------------

@dataclass(frozen=True)
class TextRules:
    """The patterns the helpers above read, built from one language's words (vocabulary.py):
    its question words, period codes, year phrases, abbreviations, money, percent and
    duration words, section words and name connectors."""

    stop: frozenset[str]
    year_phrase: re.Pattern[str]
    period: re.Pattern[str]
    abbreviation: re.Pattern[str]
    scale: dict[str, float]
    currency: dict[str, str]
    money: re.Pattern[str]
    percent: re.Pattern[str]
    number_words: dict[str, int]
    plural: str
    duration: re.Pattern[str]
    unit_synonyms: dict[str, str]
    section_ref: re.Pattern[str]
    name_connectors: frozenset[str]
    months: tuple[str, ...]  # full names, January first
    date: re.Pattern[str]

    @classmethod
    def of(cls, v: Vocabulary) -> TextRules:
        b, alt = v.edge, v.alternatives
        scale = {w: float(x) for w, x in v.table("money_scales").items()}
        currency = {code.upper(): sign for code, sign in v.table("currency_codes").items()}
        scales = "(" + "|".join(map(re.escape, scale)) + ")?"
        numbers = {w: v.table("number_words")[w] for w in v.words("duration_number_words")}
        plural = re.escape(v.data["plural_suffix"])
        units = "|".join(f"{re.escape(u)}{plural}?" if plural else re.escape(u)
                         for u in v.words("duration_units"))
        count = "|".join([r"\d+(?:\.\d+)?", *map(re.escape, numbers)])
        return cls(
            # the language's own search stop words (English's for a language with no word
            # file: its vocabulary is English's) and its question words
            stop=stop_words(v.code) | frozenset(v.words("question_words")),
            year_phrase=re.compile(rf"^{v.year_phrase}-(?:19|20)\d\d$", re.IGNORECASE),
            period=re.compile(rf"^(?:{v.period_code('quarter')}|{v.period_code('half')}"
                              rf"|{v.year_code}\d{{2}}(?:\d{{2}})?)$", re.IGNORECASE),
            abbreviation=re.compile(rf"{b}{alt('abbreviations')}\.$", re.IGNORECASE),
            scale=scale,
            currency=currency,
            money=re.compile(
                rf"(?:([£$€¥])\s?{_AMOUNT}\s*{scales}{b}"
                rf"|{b}({'|'.join(map(re.escape, currency))})\s?{_AMOUNT}\s*{scales}{b})",
                re.IGNORECASE),
            percent=re.compile(rf"(\d+(?:\.\d+)?)\s?(?:%|{alt('percent_words')}{b})",
                               re.IGNORECASE),
            number_words=numbers,
            plural=v.data["plural_suffix"],
            duration=re.compile(rf"{b}({count})[\s-]{'?' if not v.spaced else ''}({units}){b}",
                                re.IGNORECASE),
            unit_synonyms=v.table("unit_synonyms"),
            section_ref=_section_ref(v),
            name_connectors=frozenset(v.words("name_connectors")),
            months=month_names(v.code),
            date=_date(month_pattern(v.code)),
        )


def _section_ref(v: Vocabulary) -> re.Pattern[str]:
    """ "see section 4.2 of the Data Retention Policy", "articolo 5", "第5条"."""
    alt, b = v.alternatives, v.edge
    suffixes = v.words("section_suffixes")
    after = rf"\s*{alternation(suffixes)}" if suffixes else ""
    return re.compile(
        rf"{b}(?:{alt('see_words')}\s+)?{alt('section_words')}"
        rf"\s*(\d+(?:\.\d+)*[a-z]?){after}"
        rf"(?:\s+{alt('of_words')}\s+(?:{alt('articles')}\s+)?"
        r"((?:[A-Z][\w&\-]*\s*){1,6}?"
        rf"{alt('document_kinds')}\b))?",
        re.IGNORECASE)


@cache
def rules_of(code: str | None) -> TextRules:
    """The patterns of a language (English's when it has no word file)."""
    return TextRules.of(vocabulary(code))




# --- one language's reading --------------------------------------------------------------

@dataclass(frozen=True)
class Reading:
    """The helpers that read a language's words: codes and periods, content words (its stop
    words too), entities, sentences, quantities, section references and names. Built once
    per knowledge base language (`reading(code)`) and passed to the offline decisions that
    read text; `ENGLISH_READING` reads English alone."""

    code: str | None  # the knowledge base's language (None: none recorded, English)
    rules: TextRules
    stemmer: str | None  # `stemmer_of(code)`: LIGHT, a Snowball name, or None

    def stem(self, word: str) -> str:
        """`word`'s stem in this language: the one stemmer every rule of a run compares by."""
        if self.stemmer == LIGHT:
            return light_stem(word)
        if self.stemmer is None:
            return word.lower().replace("’", "'")
        return snowball_stem(self.stemmer, word)

    def term_set(self, text: str) -> set[str]:
        """Stems of every word of `text` (stop words included: coverage checks only look up
        content terms in it)."""
        return {self.stem(w) for w in words(text)}

    def is_code(self, word: str) -> bool:
        """A product/error/period code: letters and digits together (S200, E104, Q3, FY2025)."""
        return bool(_CODE.match(word)) and not self.rules.year_phrase.match(word)

    def is_period(self, word: str) -> bool:
        """A time, not a thing: Q3, H1, FY2025, 2024, mid-2025."""
        r = self.rules
        return bool(r.period.match(word) or _YEAR.match(word) or r.year_phrase.match(word))

    def content_words(self, text: str) -> list[str]:
        """Words of `text` that carry its topic (no stop/question words), original case, in order,
        without repeats (case-insensitive)."""
        seen: set[str] = set()
        out = []
        # an English KB and Latin text: English's stop and question words
        stops = self.rules.stop | stop_words(self.code) | script_stop_words(text)
        for w in words(text):
            low = w.lower()
            if low in stops or low in seen or (len(low) == 1 and not low.isdigit()):
                continue
            seen.add(low)
            out.append(w)
        return out

    def content_terms(self, text: str) -> list[str]:
        return list(dict.fromkeys(self.stem(w) for w in self.content_words(text)))

    def entities(self, text: str) -> list[str]:
        """Entity-like tokens that must match exactly: codes (S200, E104, Q3, FY2025), numbers,
        years, and capitalised words that do not start a sentence (Austin, HaldenMesh)."""
        out: list[str] = []
        stop = self.rules.stop
        text = fold_dashes(text or "")
        toks = list(_WORD.finditer(text))
        for i, m in enumerate(toks):
            w = m.group(0).strip("-'’")
            if w.lower().endswith(("'s", "’s")):
                w = w[:-2]
            if not w:
                continue
            low = w.lower()
            if self.is_code(w) or is_number(w):
                out.append(w)
                continue
            if low in stop or len(w) < 2:
                continue
            if w[0].isupper():
                start = i == 0 or _starts_sentence(text, m.start())
                if not start or (w.isupper() and len(w) >= 2):
                    out.append(w)
        return list(dict.fromkeys(out))

    def codes(self, text: str) -> list[str]:
        return list(dict.fromkeys(w.upper() for w in words(text) if self.is_code(w)))

    def absent_codes(self, question: str, held: set[str]) -> list[str]:
        """The codes `question` asks about (a financial year, a product model) whose stems are
        not in `held` (a `term_set` of what the sources say). Names and figures are not checked:
        a user may write a figure the documents state as a threshold or a range."""
        return [c for c in self.codes(question)
                if not _MEASURE.match(c) and self.stem(c) not in held]

    def split_sentences(self, text: str) -> list[str]:
        """Split text into sentences; list items and headings count as sentences."""
        out: list[str] = []
        abbrev = self.rules.abbreviation
        for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)|\n(?=#)", text or ""):
            block = " ".join(block.split())
            if not block:
                continue
            buf = ""
            for part in _SENTENCE_END.split(block):
                buf = f"{buf} {part}".strip() if buf else part
                if abbrev.search(buf) or re.search(r"\b[A-Z]\.$", buf):
                    continue
                out.append(buf)
                buf = ""
            if buf:
                out.append(buf)
        return [s.strip(" -*•#") for s in out if len(s.strip(" -*•#")) > 1]

    def quantities(self, text: str) -> list[Quantity]:
        out: list[Quantity] = []
        r = self.rules
        for m in r.money.finditer(text):
            cur = m.group(1) or m.group(4).upper()
            cur = r.currency.get(cur, cur)
            scale = r.scale.get((m.group(3) or m.group(6) or "").lower(), 1.0)
            amount = amount_value(m.group(2) or m.group(5)) * scale
            out.append(Quantity(f"money:{cur}", f"{amount:g}", m.group(0).strip()))
        for m in r.percent.finditer(text):
            out.append(Quantity("percent", f"{float(m.group(1)):g}", m.group(0)))
        months = r.months
        for m in r.date.finditer(text):
            if m.group(1):
                d, mon, y = m.group(1), m.group(2), m.group(3)
            elif m.group(4):
                mon, d, y = m.group(4), m.group(5), m.group(6)
            else:
                y, mon, d = m.group(7), months[int(m.group(8)) - 1] if 0 < int(m.group(8)) <= 12 \
                    else "?", m.group(9)
            mon_n = next((i for i, name in enumerate(months)
                          if name.startswith(mon.lower()[:3])), -1)
            out.append(Quantity("date", f"{y}-{mon_n + 1:02d}-{int(d):02d}", m.group(0)))
        for m in r.duration.finditer(text):
            n = m.group(1).lower()
            value = float(r.number_words.get(n, 0)) if n in r.number_words else float(n)
            unit = m.group(2).lower()
            unit = unit.removesuffix(r.plural) if r.plural else unit
            for word, same in r.unit_synonyms.items():
                unit = unit.replace(word, same)
            out.append(Quantity(f"duration:{unit}", f"{value:g}", m.group(0)))
        return out

    def section_links(self, text: str) -> list[SectionRef]:
        """Every "section 4.2" / "§2.1 of the Data Retention Policy" reference in `text`."""
        out: list[SectionRef] = []
        for m in self.rules.section_ref.finditer(text or ""):
            title = m.group(2)
            if title and not title[0].isupper():
                title = None
            out.append(SectionRef(m.group(1).rstrip("."), title.strip() if title else None,
                                  m.group(0)))
        return list(dict.fromkeys(out))

    def section_refs(self, text: str) -> list[str]:
        """The section ids referenced in `text` ("see section 4.2" -> ["4.2"]), in order."""
        return list(dict.fromkeys(r.section for r in self.section_links(text)))

    def name_spans(self, text: str) -> list[str]:
        """Multi-word names as written: runs of capitalised words or codes, joined by "of",
        "the", "de", "for", "&" ("Chief Financial Officer", "University of Tulsa", "Edge G2"),
        in order of first appearance. A single capitalised word that starts a sentence is not a
        name unless it is a code; stop words at a run's ends are trimmed."""
        out: list[str] = []
        r = self.rules
        text = fold_dashes(text or "")
        toks = list(_SPAN_TOKEN.finditer(text))
        i = 0
        while i < len(toks):
            w = toks[i].group(0).rstrip(".'’")
            if not (w[:1].isupper() or self.is_code(w)) or w.lower() in r.stop:
                i += 1
                continue
            j = i + 1
            end = i + 1
            while j < len(toks):
                gap = text[toks[j - 1].end():toks[j].start()]
                if gap.strip() or toks[j - 1].group(0).endswith("."):
                    break  # punctuation (a comma, a full stop) ends a name
                nxt = toks[j].group(0).rstrip(".'’")
                if nxt[:1].isupper() or self.is_code(nxt):
                    end = j + 1
                elif nxt.lower() not in r.name_connectors:
                    break
                j += 1
            span_toks = [t.group(0).rstrip(".,'’") for t in toks[i:end]]
            start = i == 0 or _starts_sentence(text, toks[i].start())
            if len(span_toks) > 1 or not start or self.is_code(span_toks[0]):
                name = " ".join(span_toks)
                if name not in out:
                    out.append(name)
            i = end
        return out

    def query_names_title(self, query: str, title: str) -> bool:
        """The query is looking for the document titled `title`: the title (without its
        disambiguation) is in the query, or the title starts with the first word of the query's
        first name ("Arthurdale …" → "Arthurdale, West Virginia", "Belinda …" → "Belinda
        Peregrín")."""
        stop = self.rules.stop
        key = name_tokens(_DISAMBIGUATION.sub("", title or ""))
        if not key or (len(key) == 1 and key[0] in stop):
            return False
        toks = name_tokens(query)
        n = len(key)
        if any(toks[i:i + n] == key for i in range(len(toks) - n + 1)):
            return True
        names = self.name_spans(query)
        lead = name_tokens(names[0])[:1] if names else []
        return bool(lead) and key[0] == lead[0] and lead[0] not in stop and len(lead[0]) >= 3


ENGLISH_READING = Reading(None, rules_of(None), stemmer_of(None))


@cache
def reading(code: str | None) -> Reading:
    """The reading of a knowledge base language (English's patterns when it has no word
    file; its own stop words whatever it is)."""
    return ENGLISH_READING if code is None else Reading(code, rules_of(code), stemmer_of(code))
