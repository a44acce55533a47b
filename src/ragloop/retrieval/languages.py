"""The language of a knowledge base: its full-text analyzer, its query stop words, detection.

One code per KB (ISO 639-1, or "mixed"), recorded in the KB meta. What it decides:

- the tantivy analyzer (tantivy-py 0.27's built-in Snowball stemmers for the European
  languages it has; lower-casing only where there is none, e.g. Hebrew; "en" keeps the
  built-in `en_stem`, so English indexes are byte-for-byte what they were);
- Chinese, Japanese and Korean runs become overlapping character bigrams *before* the
  analyzer sees them (the same function on the index and the query side), so a sentence is no
  longer one token; a lone character stays a unigram;
- the Postgres text-search configuration (Chinese/Japanese/Korean/Hebrew: `simple`);
- the query stop words (`search.stop_words` of `language/lang/<code>.json`: the words are data,
  this module only reads them).

Detection is a script count plus stop-word hits: no model, no dependency, and it only has to
tell apart the languages this module has an analyzer for (a wrong guess is a worse analyzer,
never lost data; `--language` overrides it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ragloop.core import script
from ragloop.core.errors import ConfigError

ENGLISH = "en"
MIXED = "mixed"


@dataclass(frozen=True)
class Language:
    code: str
    name: str
    stemmer: str | None  # tantivy Filter.stemmer name
    ts_config: str  # Postgres text search configuration
    bigrams: bool = False  # CJK: character bigrams


_TABLE = [
    Language("en", "English", "english", "english"),
    Language("it", "Italian", "italian", "italian"),
    Language("fr", "French", "french", "french"),
    Language("de", "German", "german", "german"),
    Language("es", "Spanish", "spanish", "spanish"),
    Language("pt", "Portuguese", "portuguese", "portuguese"),
    Language("nl", "Dutch", "dutch", "dutch"),
    Language("sv", "Swedish", "swedish", "swedish"),
    Language("da", "Danish", "danish", "danish"),
    Language("no", "Norwegian", "norwegian", "norwegian"),
    Language("fi", "Finnish", "finnish", "finnish"),
    Language("hu", "Hungarian", "hungarian", "hungarian"),
    Language("ro", "Romanian", "romanian", "romanian"),
    Language("ru", "Russian", "russian", "russian"),
    Language("el", "Greek", "greek", "greek"),
    Language("tr", "Turkish", "turkish", "turkish"),
    Language("ar", "Arabic", "arabic", "arabic"),
    Language("ta", "Tamil", "tamil", "simple"),
    Language("he", "Hebrew", None, "simple"),
    Language("zh", "Chinese", None, "simple", bigrams=True),
    Language("ja", "Japanese", None, "simple", bigrams=True),
    Language("ko", "Korean", None, "simple", bigrams=True),
    Language(MIXED, "mixed (language-neutral)", None, "simple", bigrams=True),
]
LANGUAGES = {lang.code: lang for lang in _TABLE}


def get_language(code: str | None) -> Language:
    """The Language for a code ("it", "zh", "mixed"; None means English)."""
    key = (code or ENGLISH).strip().lower()
    if key not in LANGUAGES:
        raise ConfigError(f"unknown language {code!r}; known: {', '.join(LANGUAGES)}")
    return LANGUAGES[key]


# -- the language data ---------------------------------------------------------------------

# Words live in language/lang/<code>.json, the one home of a language's data: this module reads
# their `search` section (and English's months) here, below the layers that read the rest
# through language/vocabulary.py (which loads the files with this same function).
_DATA_PACKAGE = "ragloop.language"


@cache
def language_data(code: str) -> dict[str, Any]:
    """The data file of a language (`lang/<code>.json`), parsed; {} when it has none."""
    path = resources.files(_DATA_PACKAGE) / "lang" / f"{code}.json"
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _search_words(code: str, key: str) -> frozenset[str]:
    return frozenset(language_data(code).get("search", {}).get(key, ()))


# -- month names --------------------------------------------------------------------------

# The offline rules' date reading (quantities, the planner's date split, the router's date
# cue); each month's spellings, the full name first (`months` in the data file). A language
# whose file has none reads English's, as the rules did before it had a file.
def _months(code: str | None) -> list[list[str]]:
    rows = language_data(get_language(code).code).get("months")
    return rows if rows else language_data(ENGLISH)["months"]


def month_names(code: str | None) -> tuple[str, ...]:
    """The twelve full month names, lower case, January first (None: the KB records no
    language, English)."""
    return tuple(spellings[0] for spellings in _months(code))


def month_pattern(code: str | None, *, short: bool = True) -> str:
    """A non-capturing regex group matching a month name, capitalised as written in running
    text (compile with IGNORECASE for any case); `short` adds the abbreviations (Jan, Sept),
    each tried after its month's longer spellings."""
    names = [name for row in _months(code) for name in (row if short else row[:1])]
    return "(?:" + "|".join(name.capitalize() for name in names) + ")"


# -- CJK character bigrams ----------------------------------------------------------------

CJK_CHARS = script.CJK_CHARS
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")


def cjk_grams(run: str) -> list[str]:
    """Overlapping bigrams of a run of CJK characters (a single character stays itself)."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def bigram_text(text: str) -> str:
    """`text` with every CJK run replaced by its bigrams, space separated; the rest as it was."""
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_grams(m.group())) + " ", text)


def prepare(code: str | None, text: str) -> str:
    """What the full-text analyzer is given for `text` in a KB of language `code`."""
    return bigram_text(text) if get_language(code).bigrams else text


# -- tantivy analyzers -------------------------------------------------------------------


def tokenizer_name(code: str | None) -> str:
    lang = get_language(code)
    if lang.code == ENGLISH:
        return "en_stem"  # tantivy's built-in: unchanged for English KBs
    return f"ragloop_{lang.stemmer or 'plain'}"


def text_analyzer(code: str | None):  # -> tantivy.TextAnalyzer | None
    """The analyzer to register under tokenizer_name(code); None for a built-in one."""
    if get_language(code).code == ENGLISH:
        return None
    return analyzer(code)


def analyzer(code: str | None):  # -> tantivy.TextAnalyzer
    """The analyzer of the language's full text, built in this process (for English the chain
    of tantivy's built-in `en_stem`): the Postgres store analyses text with it, so both stores
    index the same terms."""
    import tantivy

    lang = get_language(code)
    # the same chain as en_stem (simple, remove_long 40, lowercase, stemmer), with its stemmer
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
    )
    if lang.stemmer:
        builder = builder.filter(tantivy.Filter.stemmer(lang.stemmer))
    return builder.build()


# -- stop words (query side) -------------------------------------------------------------


def stop_words(code: str | None) -> frozenset[str]:
    """The query stop words of a language (`search.stop_words` of its data file)."""
    return _search_words(get_language(code).code, "stop_words")


_SCRIPT_STOPS = [
    (re.compile(f"[{CJK_CHARS}]"), ("zh", "ja")),
    (re.compile(f"[{script.HEBREW}]"), ("he",)),
]


def script_stop_words(text: str) -> frozenset[str]:
    """Stop words of the scripts other than Latin that `text` is written in (Chinese /
    Japanese bigrams, Hebrew): the offline rules add them to their English list, so a
    Latin-script text is read exactly as before."""
    found: frozenset[str] = frozenset()
    for pattern, codes in _SCRIPT_STOPS:
        if pattern.search(text or ""):
            for code in codes:
                found |= stop_words(code)
    return found


# -- detection ---------------------------------------------------------------------------

_SCRIPTS = [
    ("ja", re.compile(f"[{script.KANA}]")),
    ("ko", re.compile(f"[{script.HANGUL}]")),
    ("zh", re.compile(f"[{script.HAN}]")),
    ("he", re.compile(f"[{script.HEBREW}]")),
    ("ar", re.compile(f"[{script.ARABIC}]")),
    ("ru", re.compile(f"[{script.CYRILLIC}]")),
    ("el", re.compile(f"[{script.GREEK}]")),
    ("latin", re.compile(f"[{script.LATIN}]")),
]


def _latin_stops() -> dict[str, frozenset[str]]:
    """The languages told apart by their commonest words (`search.detect_words`), in the
    table's order (a tie goes to the first)."""
    out = {lang.code: _search_words(lang.code, "detect_words") for lang in _TABLE}
    return {code: words for code, words in out.items() if words}


_LATIN_WORD = re.compile(r"[a-zà-ÿ]+")
# a script must hold this share of the letters to decide alone; two above it: mixed
_DOMINANT, _SECOND = 0.75, 0.25
# a CJK character carries about a word: weigh it as a short word's letters
_CJK_WEIGHT = 3


def detect_language(texts: Iterable[str], max_chars: int = 200_000) -> str:
    """The language code of `texts` (e.g. the first documents of a KB); "mixed" when two
    scripts each hold a large share; English when there is nothing to go on."""
    sample, size = [], 0
    for text in texts:
        sample.append(text)
        size += len(text)
        if size >= max_chars:
            break
    joined = "\n".join(sample)[:max_chars]
    counts: Counter[str] = Counter()
    for name, pattern in _SCRIPTS:
        weight = _CJK_WEIGHT if name in ("ja", "ko", "zh") else 1
        counts[name] = weight * len(pattern.findall(joined))
    # Japanese text is mostly kanji: any kana makes the Han count Japanese
    if counts["ja"]:
        counts["ja"] += counts.pop("zh")
    total = sum(counts.values())
    if not total:
        return ENGLISH
    ranked = [(name, n / total) for name, n in counts.most_common() if n]
    if len(ranked) > 1 and ranked[1][1] >= _SECOND and ranked[0][1] < _DOMINANT:
        return MIXED
    top = ranked[0][0]
    if top != "latin":
        return top
    words = Counter(_LATIN_WORD.findall(joined.lower()))
    hits = {code: sum(words[w] for w in stops) for code, stops in _latin_stops().items()}
    best = max(hits, key=lambda code: hits[code])
    return best if hits[best] else ENGLISH
