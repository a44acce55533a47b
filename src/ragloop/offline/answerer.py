"""The extractive answerer: per sub-question, the sentence that answers it, cited.

No generative model. A sentence may be stated when it supports the sub-question (the
sub-question's content terms it contains plus embedding similarity: `_score`, against
MIN_SUPPORT); every sentence of the sections that support the part is a candidate, whatever
its own overlap, and the one that answers leads (answer_choice.py: meaning, the
question's terms weighed in the sentence's section, something new, the kind asked), and a
second follows only when it holds question terms the first does not. Table rows are
candidates of their own, with their column names (table_rows.py). Quoted with [n].
"""

from __future__ import annotations

import re

import numpy as np

from ragloop.core.answer_stream import Writing, in_pieces
from ragloop.core.decisions import Draft, Evidence
from ragloop.core.types import Usage
from ragloop.embed.base import Embedder
from ragloop.language.text import Quantity, Reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.answer_choice import CONTEXT_SHARE, Choice, asked_kind, polarity
from ragloop.offline.table_rows import candidate_sentences, is_text

# A sentence needs this much of the sub-question's terms (or meaning) to count as support:
# the default of the user's setting (RAGLOOP_STRICTNESS / --strict), chosen on the hard dev
# split.
MIN_SUPPORT = 0.34
SENTENCES_PER_PART = 2
# Only this many sentences (the best by lexical support) are embedded per sub-question: a
# sentence sharing no term with the question cannot reach MIN_SUPPORT on meaning alone, and
# embedding every sentence of every evidence item was most of an offline run's time.
EMBED_CANDIDATES = 24
# Nearest unconfirmed passages listed beside the answer for a part it cannot answer.
CLOSEST_PER_PART = 3
# A sentence's meaning score is read in its passage's context: this share is the sentence's own
# similarity to the question, the rest its whole passage's. Alone, a sentence that names only
# the product ("X is not certified for …") can out-score, on a small embedder, the one that
# answers in the property's own terms ("an ingress protection rating of …") when the question
# names the property in other words; the passage around the answer (its heading, the sentences
# that explain it) is what retrieval ranked first. 1/3: the passage counts twice the sentence;
# checked on the hard dev split (benchmarks/RESULTS.md, issue 31).
SENTENCE_SHARE = 1 / 3
# The passages of the best candidates embedded per sub-question, in a call of their own (a
# chunk is at most a few hundred tokens, so the call stays on the numpy query path; embedding
# every candidate's passage cost an offline run up to a second). A sentence of a passage not
# embedded is read alone.
PASSAGES_EMBEDDED = 4
# A second sentence follows the lead only when it answers nearly as well (this share of the
# lead's answer score) and holds question terms the lead does not.
SECOND_SHARE = 0.6
# A sentence this close to the lead's answer score follows it whatever its terms: the readings
# cannot tell the two apart, so the reader is shown both.
NEAR_TIE = 0.95
# When the question names a section, this many of its best sentences are weighed.
NAMED_POOL = 8
# The sentence that answers often shares few words with the question ("By default this value
# is set to 25 steps" for "What is the default recursion limit?"): every sentence of the
# sections that support the part is a candidate, whatever its own overlap, and is embedded so
# that meaning can pick it. Bounded: the sentences of at most this many sections (the best by
# support), at most SECTION_SENTENCES in all, embedded in one call.
SUPPORTING_SECTIONS = 4
SECTION_SENTENCES = 48
# Among candidates, meaning reads the sentence itself at the support score's share. At 0.6 a
# sentence that repeats the question's subject ("The S200 is not certified for hazardous
# areas") out-scored, on a small embedder, the one worded in the property's terms, whatever it
# said; 1/3 was level on the tuning sets and keeps the passage's reading (benchmarks/RESULTS.md).
RANK_SENTENCE_SHARE = SENTENCE_SHARE


class ExtractiveAnswerer:
    def __init__(self, embedder: Embedder | None = None, per_part: int = SENTENCES_PER_PART,
                 min_support: float | None = None, *, reading: Reading):
        """`min_support`: see MIN_SUPPORT (None: that default); `reading`: the knowledge
        base's language."""
        self.embedder = embedder
        self.reading = reading
        self.per_part = per_part
        self.min_support = MIN_SUPPORT if min_support is None else min_support
        self.usage = Usage()  # no model calls
        # one part's meaning readings (`_scores`), for the section pool: the question's and
        # the subject's vectors (None: nothing embedded), sentence and passage similarities
        self._query: np.ndarray | None = None
        self._subject: np.ndarray | None = None
        self._own: dict[int, float] = {}
        self._around: dict[int, float] = {}

    def _candidates(self, evidence: list[Evidence]) -> list[tuple[int, str]]:
        rd = self.reading
        out: list[tuple[int, str]] = []
        self._section = {ev.n: ev.section for ev in evidence}
        self._doc = {ev.n: ev.doc_id.lower() for ev in evidence}
        self._passage = {ev.n: f"{ev.section_title}\n{ev.text}".strip() for ev in evidence}
        self._title = {ev.n: ev.section_title for ev in evidence}
        for ev in evidence:
            for sentence in candidate_sentences(ev.text, rd):
                if len(sentence) > 12:
                    out.append((ev.n, sentence))
        return out

    def _score(self, question: str, cands: list[tuple[int, str]]) -> list[float]:
        return self._scores(question, cands)[0]

    def _scores(self, question: str, cands: list[tuple[int, str]], context: str = ""
                ) -> tuple[list[float], dict[int, float]]:
        """Per candidate, its support score; and, for the candidates embedded, their meaning
        score (sentence and passage against the question).

        A follow-up's `context` (what was searched: the typed words with the previous turn's
        query) says which passages are about the conversation's subject: its terms beyond
        the question's count at CONTEXT_SHARE, found in the sentence or its passage, and the
        passage's meaning is read against it. The sentence's own meaning is read against the
        question as typed: the typed words pick the sentence ("Is it waterproof?" after a
        question on the T9's battery: the T9's passages, its water rating)."""
        rd = self.reading
        terms = {rd.stem(t) for t in rd.content_terms(question)}
        carried = {rd.stem(t) for t in rd.content_terms(context)} - terms if context else set()
        # no separate check that a sentence names the question's codes and names: it cost
        # HotpotQA answers (the answer sentence of a second hop seldom names the question's
        # entities) and helped on no other set (offline/README.md)
        lexical = []
        whole = len(terms) + CONTEXT_SHARE * len(carried)
        for n, sentence in cands:
            have = {rd.stem(t) for t in rd.term_set(sentence)}
            about = carried & (have | {rd.stem(t) for t in rd.term_set(self._passage[n])})
            lexical.append((len(terms & have) + CONTEXT_SHARE * len(about)) / whole
                           if whole else 0.0)
        if self.embedder is None or not cands:
            return lexical, {}
        best = sorted((i for i, lex in enumerate(lexical) if lex > 0),
                      key=lambda i: -lexical[i])[:EMBED_CANDIDATES]
        if not best:
            return [0.6 * lex for lex in lexical], {}
        vecs = np.asarray(self.embedder.embed([question, *[cands[i][1] for i in best]]))
        own = dict(zip(best, (float(c) for c in vecs[1:] @ vecs[0]), strict=True))
        passages = list(dict.fromkeys(cands[i][0] for i in best))[:PASSAGES_EMBEDDED]
        subject = np.asarray(self.embedder.embed([context]))[0] if carried else vecs[0]
        around = dict(zip(passages, (float(c) for c in np.asarray(self.embedder.embed(
            [self._passage[n] for n in passages])) @ subject), strict=True))
        # kept for the section pool: sentences read against the question, passages against
        # the subject (the follow-up's searched query, else the question)
        self._query, self._subject, self._own, self._around = vecs[0], subject, own, around
        cos = {i: SENTENCE_SHARE * c + (1 - SENTENCE_SHARE) * around.get(cands[i][0], c)
               for i, c in own.items()}
        return [0.6 * lex + 0.4 * cos.get(i, 0.0) for i, lex in enumerate(lexical)], cos

    def _rank_meaning(self, i: int, cands: list[tuple[int, str]]) -> float:
        """Meaning for choosing among candidates: the sentence's own similarity weighs more
        than in the support score (RANK_SENTENCE_SHARE), since the sentences of one section
        share its passage's."""
        c = self._own[i]
        return RANK_SENTENCE_SHARE * c + (1 - RANK_SENTENCE_SHARE) * \
            self._around.get(cands[i][0], c)

    def _section_pool(self, choice: Choice, cands: list[tuple[int, str]],
                      support: list[float], meaning: dict[int, float]) -> list[int]:
        """Every sentence of the sections that support the part (a sentence of theirs passes
        the threshold, its passage's terms counted half), embedded so that meaning, not
        overlap, weighs it: the sentence that answers need not share the question's words."""
        best: dict[int, float] = {}
        for i, (n, _s) in enumerate(cands):
            score = max(support[i], self._in_context(choice, i, cands, meaning))
            if score >= self.min_support:
                best[n] = max(best.get(n, 0.0), score)
        sections = sorted(best, key=lambda n: -best[n])[:SUPPORTING_SECTIONS]
        pool = [i for n in sections for i, c in enumerate(cands) if c[0] == n]
        pool = pool[:SECTION_SENTENCES]
        if self.embedder is None or self._query is None:
            return pool
        todo = [i for i in pool if i not in self._own]
        fresh = [n for n in sections if n not in self._around]
        if todo or fresh:
            vecs = np.asarray(self.embedder.embed(
                [cands[i][1] for i in todo] + [self._passage[n] for n in fresh]))
            own = [float(c) for c in vecs[:len(todo)] @ self._query] if todo else []
            around = [float(c) for c in vecs[len(todo):] @ self._subject] if fresh else []
            self._own.update(zip(todo, own, strict=True))
            self._around.update(zip(fresh, around, strict=True))
        for i in pool:
            c = self._own[i]
            meaning[i] = SENTENCE_SHARE * c + (1 - SENTENCE_SHARE) * \
                self._around.get(cands[i][0], c)
        return pool

    def write(self, question: str, sub_questions: list[str], evidence: list[Evidence],
              context: str = "") -> Writing:
        """The answer, chosen whole, then streamed a sentence at a time."""
        return (yield from in_pieces(self.answer(question, sub_questions, evidence, context)))

    def answer(self, question: str, sub_questions: list[str], evidence: list[Evidence],
               context: str = "") -> Draft:
        """`context`: a follow-up's search query (core.decisions.Answerer; `_scores`)."""
        rd = self.reading
        parts = sub_questions or [question]
        cands = self._candidates(evidence)
        unconfirmed = {ev.n: ev.sub_question for ev in evidence if not ev.confirmed}
        nearest = [c for c in cands if c[0] in unconfirmed]
        cands = [c for c in cands if c[0] not in unconfirmed]
        lines: list[str] = []
        missing: list[str] = []
        closest: dict[str, list[tuple[int, str]]] = {}
        chosen_all: list[tuple[int, str]] = []
        held = rd.term_set(" ".join(f"{ev.doc_id} {ev.section_title} {ev.text}"
                                 for ev in evidence))
        for index, part in enumerate(parts):
            absent = rd.absent_codes(part, held)
            if absent:
                # a code the question asks about (a product model, a financial year) that no
                # evidence mentions: the nearest sentences would answer another question
                missing.append(f"{part.rstrip('?. ')} (no source mentions {', '.join(absent)})")
                continue
            self._query = None
            support, meaning = self._scores(part, cands, context) if cands else ([], {})
            # the question asks what a section it names says ("under section 4.3 of the
            # Information Security Policy, …"): that section's best sentences answer it, even
            # when they share no words with the question ("a stronger pound" for "a
            # strengthening of sterling")
            named = self._named_evidence(part)
            chosen = self._choose(part, cands, support, meaning, named)
            if not chosen:
                missing.append(part)
                own = [c for c in nearest if unconfirmed[c[0]] == index]
                if own:
                    closest[part] = self._closest(part, own)
                continue
            chosen_all.extend(chosen)
            body = " ".join(f"{s.rstrip()} [{n}]" for n, s in chosen)
            if asked_kind(part, rd) == "yes_no":
                # a yes/no question is answered yes or no first, read from the lead's
                # polarity against the question's; the quoted sentence says why
                word = polarity(chosen[0][1], part, rd)
                body = f"{word}: {body}" if word else body
            lines.append(f"{part.rstrip('?')}: {body}" if len(parts) > 1 else body)
        # a part nothing confirmed answers is declined in the answer and cites nothing; the
        # nearest unconfirmed passages go beside the answer, never into it
        words = vocabulary(rd.code)  # the fixed sentences, in the knowledge base's language
        for part in missing:
            lines.append(words.text("decline.part_missing").format(part=part))
        conflicts = self._conflicts(chosen_all)
        for c in conflicts:
            lines.append(words.text("answer_text.sources_disagree").format(conflict=c))
        return Draft(text="\n".join(lines), missing=missing,
                     unanswerable=len(missing) == len(parts), conflicts=conflicts,
                     closest=[item for part in missing for item in closest.get(part, [])])

    def _choose(self, part: str, cands: list[tuple[int, str]], support: list[float],
                meaning: dict[int, float], named: set[int]) -> list[tuple[int, str]]:
        """The sentence that answers `part` and, when it adds something (question terms the
        lead's sections lack, the section the lead names, or a source that disagrees with
        it), one more."""
        order = sorted(range(len(cands)), key=lambda i: -support[i])
        choice = Choice.of(part, [s for _, s in cands], self.reading)
        if named:
            pool = [i for i in order if cands[i][0] in named][:NAMED_POOL]
        elif not support or support[order[0]] < self.min_support:
            return []  # no sentence supports the part: it is declined
        else:
            # the part is supported; a sentence may answer it with its passage's help (the
            # question's terms in its heading or the sentences around it count half): the
            # sentence that answers seldom repeats the words its section is titled with
            pool = self._section_pool(choice, cands, support, meaning)
        # one of each sentence; a run of numbers and symbols (a binary layout) is no answer
        first: dict[str, int] = {}
        for i in pool:
            if is_text(cands[i][1]):
                first.setdefault(cands[i][1], i)
        pool = list(first.values())
        if not pool:
            return []
        rank = {i: choice.score(cands[i][1], self._title[cands[i][0]],
                                self._passage[cands[i][0]], self._rank_meaning(i, cands)
                                if self._query is not None and i in self._own
                                else meaning.get(i, support[i]))
                for i in pool}
        ranked = sorted(pool, key=lambda i: -rank[i])
        lead = ranked[0]
        chosen = [cands[lead]]
        for i in ranked[1:]:
            if len(chosen) >= self.per_part:
                break
            # a source that disagrees with the lead adds something whatever its words
            # what the chosen sentences' sections already say (their titles and passages)
            said = " ".join(self._passage[n] for n in dict.fromkeys(n for n, _ in chosen))
            n = cands[i][0]
            hop = n != cands[lead][0] and choice.links(cands[lead][1], self._title[n])
            if rank[i] >= NEAR_TIE * rank[lead] or hop or (
                    rank[i] >= SECOND_SHARE * rank[lead] and choice.adds(said, cands[i][1])) \
                    or self._conflicts([cands[lead], cands[i]]):
                chosen.append(cands[i])
        return chosen

    def _in_context(self, choice: Choice, i: int, cands: list[tuple[int, str]],
                    meaning: dict[int, float]) -> float:
        """The support score of candidate `i` with its passage's terms counted half."""
        if not choice.terms:
            return 0.0
        have = choice.covered(cands[i][1])
        around = choice.covered(self._passage[cands[i][0]]) - have
        lexical = (len(have) + CONTEXT_SHARE * len(around)) / len(choice.terms)
        return 0.6 * lexical + 0.4 * meaning.get(i, 0.0)

    def _closest(self, part: str, nearest: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """The best sentence of each nearest passage: what the knowledge base has closest to
        a part it does not answer."""
        best: dict[int, tuple[float, str]] = {}
        for score, (n, sentence) in zip(self._score(part, nearest), nearest, strict=True):
            if n not in best or score > best[n][0]:
                best[n] = (score, sentence)
        top = sorted(best, key=lambda n: -best[n][0])[:CLOSEST_PER_PART]
        return [(n, best[n][1].strip()) for n in sorted(top)]

    def _named_evidence(self, question: str) -> set[int]:
        """Evidence numbers of the sections the question refers to by number (of the document
        it names, when it names one: its title words in the doc_id)."""
        rd = self.reading
        out: set[int] = set()
        for ref in rd.section_links(question):
            want = {rd.stem(w) for w in rd.content_words(ref.doc_title or "")}
            for n, section in self._section.items():
                if section != ref.section:
                    continue
                have = {rd.stem(w) for w in re.split(r"[^a-z0-9]+", self._doc[n])}
                if not want or len(want & have) >= max(1, len(want) // 2):
                    out.add(n)
        return out

    def _conflicts(self, chosen: list[tuple[int, str]]) -> list[str]:
        """Two chosen sentences from different evidence about the same subject, with different
        figures of the same kind (money, percent, date, duration). Of a sentence's several
        figures of a kind, the one whose nearby words best match the other sentence is
        compared ("Edge G2 revenue was £2.5m …, and Europe was £4.6m" against a sentence
        about Europe compares £4.6m)."""
        rd = self.reading
        out: list[str] = []
        for i, (n1, s1) in enumerate(chosen):
            t1 = {rd.stem(t) for t in rd.content_terms(s1)}
            for n2, s2 in chosen[i + 1:]:
                if n1 == n2:
                    continue
                t2 = {rd.stem(t) for t in rd.content_terms(s2)}
                if len(t1 & t2) < max(2, min(len(t1), len(t2)) // 2):
                    continue
                f1, f2 = _figure_for(s1, t2, rd), _figure_for(s2, t1, rd)
                for kind, a in f1.items():
                    b = f2.get(kind)
                    if b is not None and a.value != b.value:
                        out.append(vocabulary(rd.code).text("answer_text.versus").format(
                            a=f"{a.text} [{n1}]", b=f"{b.text} [{n2}]"))
                        break
        return out


# The words before a figure (and a few after) say what it measures.
_BEFORE, _AFTER = 60, 20


def _figure_for(sentence: str, subject: set[str], rd: Reading) -> dict[str, Quantity]:
    """Per kind, the sentence's figure whose nearby words share most with `subject`."""
    best: dict[str, tuple[int, Quantity]] = {}
    for q in rd.quantities(sentence):
        at = max(sentence.find(q.text), 0)
        near = sentence[max(0, at - _BEFORE): at + len(q.text) + _AFTER]
        overlap = len(subject & {rd.stem(t) for t in rd.content_terms(near)})
        if q.kind not in best or overlap > best[q.kind][0]:
            best[q.kind] = (overlap, q)
    return {kind: q for kind, (_, q) in best.items()}
