"""Does a cited passage support its sentence? The offline citation checker.

An answer's sentences are split (language/text.split_sentences, which knows 。！？) and each
citation [n] is paired with the words it follows: the whole sentence, or, when a sentence cites
several times, the stretch since the previous citation. A pair is supported when

- lexically, every figure (numbers with thousands separators and currency signs normalised,
  "£15.8m" = "£15.8 million", English number words, runs of Chinese numerals) and every code
  (S200, IP67, FY2025, E104) of the claim is in the passage, and every name (a capitalised word
  that does not start the sentence; "l'Etna" reads as "Etna") is in the passage or in its
  document id and section title; and
- on meaning, the claim's content terms are covered by the passage (stems; CJK bigrams), or
  the claim is close to one of the passage's sentences in the knowledge base's embedder.

A figure or name the passage lacks is the strong signal: "the S200 lasts 7 years" cited to a
passage saying 5 is never supported. Right words in a wrong relation ("above £2,500: the
department head") pass the lexical test and are left to meaning, which catches few of them:
benchmarks/citation_checker.py measures how many on a hand-labelled set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ragloop.core.script import HAN_NUMERALS, SENTENCE_ENDS
from ragloop.embed.base import Embedder
from ragloop.language.amounts import FIGURE, without_thousands
from ragloop.language.text import Reading, words
from ragloop.language.vocabulary import vocabulary

# Tuned on the dev half of examples/evals/citation_support.jsonl only (see RESULTS.md).
MIN_COVERAGE = 0.6  # share of the claim's content terms the passage holds
MIN_SIMILARITY = 0.8  # cosine of the claim with the passage's closest sentence
# A claim with fewer content terms than this is judged on its figures, codes and names alone.
MIN_TERMS = 2

# [3], [3, 5], [3-4]: as agent/evidence.py reads them.
CITATION = re.compile(r"\[(\d+(?:\s*[,;–-]\s*\d+)*)\]")
# "… fact. [1]" → "… fact [1]." so the citation stays with the sentence it follows.
_AFTER_STOP = re.compile(rf"([{SENTENCE_ENDS}])(\s*)((?:\[\d+(?:\s*[,;–-]\s*\d+)*\]\s*)+)")
@cache
def _claim_numbers(code: str | None) -> tuple[dict[str, int], re.Pattern[str] | None]:
    """The number words a claim may state a figure with, in the knowledge base's language
    (not "one": "one of the …" is no figure), and their pattern (None: it has none, as
    Chinese, whose numerals are read as runs of characters below)."""
    v = vocabulary(code)
    numbers = {w: v.table("number_words")[w] for w in v.words("claim_number_words")}
    if not numbers:
        return numbers, None
    found = re.compile(rf"{v.edge}(" + "|".join(map(re.escape, numbers)) + rf"){v.edge}",
                       re.IGNORECASE)
    return numbers, found


# A figure with its unit ("8.5 Ah", "±50 g", "915 MHz"): "5 Ah" is not in a passage that says
# "5 years" and "8.5 Ah".
_UNIT = re.compile(r"(?<![A-Za-z\d.,£$€¥])(\d+(?:\.\d+)?)\s?"
                   r"(ah|mah|v|mv|w|kw|g|kg|mm|cm|m|km|hz|khz|mhz|ghz|gb|mb|tb|°c|°f|db|%)"
                   r"(?![\w°])", re.IGNORECASE)
_CJK_NUMERALS = re.compile(f"[{HAN_NUMERALS}]{{2,}}")
# "l'Etna", "dell'INPS", "d'Europa": an elided article before a name
_ELISION = re.compile(r"^[A-Za-zÀ-ÿ]{1,4}['’](?=\w)")


@cache
def _own_labels(code: str | None) -> re.Pattern[str]:
    """The answerer's own label, not a claim about the sources: the head of the conflict
    note offline/answerer.py writes from the language's `answer_text.sources_disagree`
    ("Note: the sources disagree — ", "注意：来源之间有分歧——"); its spaces match any spacing
    and its dashes any dash."""
    head = vocabulary(code).text("answer_text.sources_disagree").split("{conflict}")[0]
    parts = [r"\s*" if c.isspace() else "[—–-]" if c in "—–-" else re.escape(c)
             for c in head.strip()]
    return re.compile("^" + re.sub(r"(?:\\s\*)+", r"\\s*", "".join(parts)) + r"\s*",
                      re.IGNORECASE)


@dataclass(frozen=True)
class Claim:
    """Words of an answer and the evidence numbers cited for them."""

    sentence: str  # the sentence as written, without its citation markers
    text: str  # what the citations vouch for (the sentence, or its part before a citation)
    cited: tuple[int, ...]
    marked: tuple[int, ...] = ()  # every number cited for it, in the answer's order


@dataclass
class Verdict:
    n: int
    claim: Claim
    supported: bool
    reason: str = ""  # why not: "not in the passage: £16.2m" / "meaning 0.41"
    coverage: float = 0.0
    similarity: float | None = None


@dataclass(frozen=True)
class Passage:
    text: str
    context: str = ""  # doc_id and section title: names a passage leaves to its headings


@dataclass
class _Items:
    figures: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def citation_numbers(group: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        bounds = re.split(r"\s*[–-]\s*", part)
        if len(bounds) == 2 and 0 <= int(bounds[1]) - int(bounds[0]) < 20:
            out.extend(range(int(bounds[0]), int(bounds[1]) + 1))
        else:
            out.extend(int(b) for b in bounds)
    return out


def _without_markers(text: str) -> str:
    text = " ".join(CITATION.sub(" ", text).split())
    return re.sub(rf"\s+([,;:{SENTENCE_ENDS}])", r"\1", text)


def _strip_label(text: str, labels: Sequence[str], rd: Reading) -> str:
    text = _own_labels(rd.code).sub("", text)
    low = text.casefold()
    for label in labels:  # "<sub-question>: <answer>" (the extractive answerer's parts)
        head = label.strip().rstrip("?？").casefold()
        if head and low.startswith(head) and text[len(head):].lstrip("?？ ").startswith(":"):
            return text[len(head):].lstrip("?？ ")[1:].strip()
    return text


def answer_sentences(answer: str, rd: Reading) -> list[str]:
    """The answer's sentences, each with the citations that follow it ("fact. [1]")."""
    text = _AFTER_STOP.sub(lambda m: f" {m.group(3).strip()}{m.group(1)}{m.group(2)}", answer)
    return rd.split_sentences(text)


def claims(answer: str, rd: Reading, labels: Sequence[str] = ()) -> list[Claim]:
    """The cited claims of an answer, in order; `labels` are prefixes that are not claims
    (the sub-questions an answer heads its parts with)."""
    out: list[Claim] = []
    for sentence in answer_sentences(answer, rd):
        plain = _without_markers(sentence)
        # "[1][2]" and "[1] [2]" are one citation of two passages
        groups: list[tuple[int, int, list[int]]] = []
        for m in CITATION.finditer(sentence):
            nums = citation_numbers(m.group(1))
            if groups and not sentence[groups[-1][1]:m.start()].strip():
                groups[-1] = (groups[-1][0], m.end(), groups[-1][2] + nums)
            else:
                groups.append((m.start(), m.end(), nums))
        start = 0
        for i, (g_start, g_end, nums) in enumerate(groups):
            # one citation: the whole sentence; several: each vouches for the words before it
            if len(groups) == 1:
                part = sentence
            else:
                part = sentence[start:g_start]
                if i + 1 == len(groups):
                    part += sentence[g_end:]
            start = g_end
            part = _strip_label(_without_markers(part), labels, rd)
            out.append(Claim(sentence=plain, text=part, cited=tuple(dict.fromkeys(nums)),
                             marked=tuple(nums)))
    return out


def _normalise(text: str, rd: Reading) -> str:
    text = without_thousands(text)
    numbers, found = _claim_numbers(rd.code)
    return found.sub(lambda m: str(numbers[m.group(1).lower()]), text) if found else text


def _money(text: str, rd: Reading) -> set[str]:
    return {f"{q.kind}={q.value}" for q in rd.quantities(text) if q.kind.startswith("money")}


def _units(text: str) -> set[str]:
    return {f"{float(m.group(1)):g} {m.group(2).lower()}" for m in _UNIT.finditer(text)}


def _figures(text: str, rd: Reading) -> set[str]:
    """Numbers as values ("3,350" = "3.350" = "3350"), amounts of money with their currency
    and scale (£2.5m = £2,500,000), figures with their unit, runs of Chinese numerals."""
    text = _normalise(text, rd)
    out = {f"{float(m.group()):g}" for m in FIGURE.finditer(text)}
    return out | _money(text, rd) | _units(text) | set(_CJK_NUMERALS.findall(text))


def _items(text: str, rd: Reading) -> _Items:
    items = _Items()
    norm = _normalise(text, rd)
    money = _money(norm, rd)
    written = {without_thousands(q.text) for q in rd.quantities(norm)
               if q.kind.startswith("money")}
    units = _units(norm)
    # an amount must be there in its currency ("$45" is not "£45"), a measure with its unit
    items.figures = sorted(money) + sorted(units)
    held = {f"{float(m.group()):g}" for w in written for m in FIGURE.finditer(w)}
    held |= {u.split()[0] for u in units}
    items.figures += [f for f in (f"{float(m.group()):g}" for m in FIGURE.finditer(norm))
                      if f not in held]
    items.figures.extend(_CJK_NUMERALS.findall(norm))
    stop = rd.rules.stop
    toks = words(text)
    for i, w in enumerate(toks):
        if rd.is_code(w) and not re.fullmatch(r"\d+[a-z]{1,3}", w, re.IGNORECASE):
            items.codes.append(w.upper())  # "15.8m", "8.5Ah" are figures, not codes
            continue
        w = _ELISION.sub("", w)
        if i == 0 and not _ELISION.match(toks[0]):
            continue  # a sentence's first word is capitalised anyway
        if len(w) > 1 and w[0].isupper() and not any(c.isdigit() for c in w) \
                and w.lower() not in stop and not _UNIT.fullmatch(f"1 {w}"):
            items.names.append(w)
    items.figures = list(dict.fromkeys(items.figures))
    items.codes = list(dict.fromkeys(items.codes))
    items.names = list(dict.fromkeys(items.names))
    return items


def _acronyms(text: str) -> set[str]:
    """"cfo" for "Chief Financial Officer", "rma" for "Return Merchandise Authorisation"."""
    out: set[str] = set()
    for run in re.findall(r"[A-Z][a-z]+(?:\s+(?:of\s+|and\s+)?[A-Z][a-z]+)+", text):
        initials = "".join(w[0] for w in run.split() if w[0].isupper()).lower()
        out.update(initials[i:j] for i in range(len(initials))
                   for j in range(i + 2, len(initials) + 1))
    return out


class _PassageIndex:
    """What a passage holds, computed once per passage."""

    def __init__(self, passage: Passage, rd: Reading) -> None:
        # "products/pulse-pricing" names Pulse
        both = f"{passage.text} {re.sub(r'[-_/.]+', ' ', passage.context)}"
        self.rd = rd
        self.figures = _figures(both, rd)
        self.codes = {w.upper() for w in words(both)}
        self.lower = {_ELISION.sub("", w).lower() for w in words(both)}
        self.stems = {rd.stem(_ELISION.sub("", w)) for w in words(both)} | rd.term_set(both)
        self.lower |= _acronyms(both)
        self.stems |= self.lower
        self.sentences = [s for s in rd.split_sentences(passage.text) if len(s) > 1] or \
            [passage.text]

    def lacks(self, items: _Items) -> list[str]:
        out = [f.split("=")[-1] for f in items.figures if f not in self.figures]
        out += [c for c in items.codes if c not in self.codes]
        out += [n for n in items.names if n.lower() not in self.lower
                and self.rd.stem(n) not in self.stems]
        return out

    def coverage(self, terms: list[str]) -> float:
        if not terms:
            return 1.0
        return sum(t in self.stems for t in terms) / len(terms)


class SupportChecker:
    """Offline support of (claim, passage) pairs: lexical always, embedding when an embedder is
    given (the knowledge base's, so the same model that indexed the passages)."""

    def __init__(self, embedder: Embedder | None = None, *, min_coverage: float = MIN_COVERAGE,
                 min_similarity: float = MIN_SIMILARITY,
                 reading: Reading) -> None:
        self.embedder = embedder
        self.reading = reading  # the knowledge base's language
        self.min_coverage = min_coverage
        self.min_similarity = min_similarity

    def check(self, pairs: Sequence[tuple[str, Passage]]) -> list[Verdict]:
        """One verdict per (claim text, passage) pair, with n=0 (see `check_claims`)."""
        claims_ = [Claim(sentence=t, text=t, cited=(0,)) for t, _ in pairs]
        return self._verdicts([(c, 0, p) for c, (_, p) in zip(claims_, pairs, strict=True)])

    def check_claims(self, found: Sequence[Claim],
                     passages: dict[int, Passage]) -> list[Verdict]:
        """A verdict for every (claim, cited number) whose number has a passage."""
        triples = [(c, n, passages[n]) for c in found for n in c.cited if n in passages]
        verdicts = self._verdicts(triples)
        # a claim cited to several passages may take its facts from each: a passage that
        # fails alone is supported when the passages together support the claim and it holds
        # some of the claim's figures, codes or names, or half its terms
        joint: dict[Claim, Verdict] = {}
        for v, (claim, _, passage) in zip(verdicts, triples, strict=True):
            ns = [m for m in claim.cited if m in passages]
            if v.supported or len(ns) < 2:
                continue
            if claim not in joint:
                union = Passage(" ".join(passages[m].text for m in ns),
                                " ".join(passages[m].context for m in ns))
                joint[claim] = self._verdicts([(claim, 0, union)])[0]
            items = _items(claim.text, self.reading)
            held = len(items.figures) + len(items.codes) + len(items.names) - \
                len(_PassageIndex(passage, self.reading).lacks(items))
            if joint[claim].supported and (held > 0 or v.coverage >= 0.5):
                v.supported, v.reason = True, ""
        return verdicts

    def _verdicts(self, triples: list[tuple[Claim, int, Passage]]) -> list[Verdict]:
        rd = self.reading
        indexes: dict[Passage, _PassageIndex] = {}
        out: list[Verdict] = []
        need_meaning: list[int] = []
        for claim, n, passage in triples:
            index = indexes.setdefault(passage, _PassageIndex(passage, rd))
            items = _items(claim.text, rd)
            lacking = index.lacks(items)
            terms = [rd.stem(t) for t in rd.content_terms(_ELISION.sub("", claim.text))]
            terms = list(dict.fromkeys(terms))
            cov = index.coverage(terms)
            if lacking:
                out.append(Verdict(n, claim, False, "not in the passage: " + ", ".join(lacking),
                                   coverage=cov))
                continue
            # a claim that is only figures and names ("versus £2.4m") stands on them
            ok = cov >= self.min_coverage or len(terms) < MIN_TERMS
            out.append(Verdict(n, claim, ok, "" if ok else f"coverage {cov:.2f}",
                               coverage=cov))
            if not ok and self.embedder is not None:
                need_meaning.append(len(out) - 1)
        if need_meaning:
            self._by_meaning([out[i] for i in need_meaning],
                             [indexes[triples[i][2]] for i in need_meaning])
        return out

    def _by_meaning(self, verdicts: list[Verdict], indexes: list[_PassageIndex]) -> None:
        assert self.embedder is not None
        texts: list[str] = []
        for v, index in zip(verdicts, indexes, strict=True):
            texts.append(v.claim.text)
            texts.extend(index.sentences)
        uniq = list(dict.fromkeys(texts))
        vecs = np.asarray(self.embedder.embed(uniq))
        row = {t: vecs[i] for i, t in enumerate(uniq)}
        for v, index in zip(verdicts, indexes, strict=True):
            sims = [float(row[s] @ row[v.claim.text]) for s in index.sentences]
            v.similarity = max(sims) if sims else 0.0
            if v.similarity >= self.min_similarity:
                v.supported, v.reason = True, ""
            else:
                v.reason = f"coverage {v.coverage:.2f}, meaning {v.similarity:.2f}"
