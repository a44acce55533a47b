"""Eval metrics over result records (one dict per question and path; see runner.make_record).

Every figure is a plain function of the records, so the report can be recomputed from
OUT/results.jsonl alone. Conventions:

- Documents: `docs` is the run's evidence list reduced to distinct doc_ids, in order. The
  capped metrics (recall@k, all_gold@k, MRR) read only its first k entries: the agent gets no
  credit for looking at more documents than single-shot may return. `recall_uncapped` reads all.
  `confirmed_docs` leaves out the evidence marked unconfirmed (the offline agent's nearest
  passages for a part it could not answer): `all_gold@k_confirmed` counts only what the grader
  kept or the run read on purpose.
- Sections: `sections` lists the evidence as "doc_id§section". Where the dataset names gold
  sections (`gold_sections`, [doc, section] pairs), section_recall@k / all_sections@k ask
  whether any / every gold section is among the evidence of the first k documents; a piece
  of evidence inside a gold section ("7.1" for gold "7") counts for it.
- Retrieval metrics count questions that have gold documents; answer accuracy those with a
  reference answer that are answerable; abstention the unanswerable ones.
- p95 is the nearest-rank percentile: the ceil(0.95·n)-th smallest value.
- Shares are fractions in [0, 1] except the `_pct` figures, which are percentages.
- Steps: `used_all_steps_pct` counts the runs whose steps reached their ceiling however they
  ended; `truncated_pct` the runs forced to answer (status truncated). They differ: a run
  can spend every step and end `answered`, and one can end truncated before its ceiling (a
  reply cut off at its token budget, the pipeline's parts left unanswered).
- Citations (from each record's `citation_support`, the offline checker's verdicts on the
  answer as written): `citation_precision` is the share of (claim, cited passage) pairs whose
  passage supports the claim; `all_claims_supported` the share of answers stating anything
  whose every claim is cited and every citation supported.
- Against single-shot (every path beside a `single` one, paired by question id):
  `lost@k` counts the questions whose gold documents were all in single-shot's first k and
  are not all in the path's first k, `gained@k` the reverse; `_pct` beside each is its share
  of the questions with gold documents. They are figured at k and at 5 (the issue-27
  objective is all-gold at both, per type, with lost small), with `all_gold@5` beside them.
- Answers (records with a reference answer, `reference` and its `reference_aliases`): a
  reference counts when any of its spellings is there. `answer_first` asks whether the
  answer's first sentence (up to its first citation marker, or its first line or sentence
  end) holds it, `answer_em` whether the answer does anywhere, `answer_f1` is the best token
  F1 over the spellings (Chinese and Japanese by character, as CMRC scores), and
  `answer_words_mean` the answer's length in words (a CJK character counts as one).
  `answer_first_found` / `answer_em_found` count only the questions whose gold documents
  were all in the evidence (`found_n` of them); `found_missed` is how many of those the
  answer misses anywhere: retrieval found the gold, the answer did not use it (the report
  warns). `answer_judged` is the share an LLM judge (eval/answer_judge.py, when a model is
  configured) found correct. `answered_anyway` is the share of unanswerable questions the
  run did not decline.
- A metric with nothing to count is None.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any

from ragloop.core import script
from ragloop.eval.datasets import SINGLE_TYPES, UNANSWERABLE_TYPE
from ragloop.language.amounts import without_thousands
from ragloop.language.vocabulary import ENGLISH_WORDS

_CITE = re.compile(r"\[\d+\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NON_WORD = re.compile(r"[^\w£$€%]+")
_SYMBOL = re.compile(r"([£$€%])")
_CJK = script.UNSPACED  # a script with no spaces between words: each character is a word
_END = f"[{script.SENTENCE_ENDS}]"
_FIRST_END = re.compile(rf"(?:{_END}\s*)?\[\d+\]|{_END}(?=\s|$)")
_WORDS = re.compile(r"[^\W_]+")


# -- documents -------------------------------------------------------------------------------

def distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def first_gold_rank(docs: Sequence[str], gold: Iterable[str]) -> int | None:
    """1-based rank of the first gold document in `docs`, or None."""
    wanted = set(gold)
    for i, d in enumerate(docs, start=1):
        if d in wanted:
            return i
    return None


def recall_any(docs: Sequence[str], gold: Sequence[str], k: int | None) -> bool:
    top = docs[:k] if k is not None else docs
    return any(g in top for g in gold)


def recall_all(docs: Sequence[str], gold: Sequence[str], k: int | None) -> bool:
    top = docs[:k] if k is not None else docs
    return bool(gold) and all(g in top for g in gold)


def reciprocal_rank(docs: Sequence[str], gold: Sequence[str], k: int) -> float:
    rank = first_gold_rank(docs[:k], gold)
    return 1.0 / rank if rank else 0.0


def sections_found(record: dict[str, Any], k: int | None) -> list[bool]:
    """For each gold [doc, section] pair of the record, whether the evidence of its first k
    documents holds that section (or a section inside it)."""
    docs = record.get("docs") or []
    top = set(docs[:k] if k is not None else docs)
    held: dict[str, set[str]] = {}
    for item in record.get("sections") or []:
        doc, _, section = str(item).rpartition("§")
        if doc in top:
            held.setdefault(doc, set()).add(section)
    return [any(s == want or s.startswith(want + ".") for s in held.get(doc, ()))
            for doc, want in record.get("gold_sections") or []]


# -- answers ---------------------------------------------------------------------------------

def normalize_answer(text: str) -> str:
    """Lower case, no citation markers, thousands separators, punctuation or articles;
    currency and percent signs become words of their own ("£2,500" → "£ 2500")."""
    text = _CITE.sub(" ", text.lower())
    text = without_thousands(text)
    text = "".join(" " if ch in string.punctuation and ch not in "£$€%" else ch for ch in text)
    text = _SYMBOL.sub(r" \1 ", _NON_WORD.sub(" ", text))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    """Normalised words; a CJK character is a token of its own."""
    return [t for w in normalize_answer(text).split()
            for t in (list(w) if _CJK.search(w) else [w])]


def exact_match(reference: str, answer: str) -> bool:
    """The normalised reference appears in the normalised answer (on word boundaries; any
    place for a reference in a script written without spaces)."""
    ref = normalize_answer(reference)
    got = normalize_answer(answer)
    if _CJK.search(ref):
        return bool(ref) and ref.replace(" ", "") in got.replace(" ", "")
    return bool(ref) and f" {ref} " in f" {got} "


def first_sentence(answer: str) -> str:
    """The answer's first sentence: its first line up to its first citation marker (kept),
    else up to its first sentence end."""
    line = next((ln for ln in (answer or "").splitlines() if ln.strip()), "")
    m = _FIRST_END.search(line)
    return line[:m.end()] if m else line


def answer_words(answer: str) -> int:
    """Words of an answer without its citation markers; a CJK character counts as a word."""
    text = _CITE.sub(" ", answer or "")
    return sum(len(_CJK.findall(w)) + bool(_CJK.sub("", w)) for w in _WORDS.findall(text))


def references(record: dict[str, Any]) -> list[str]:
    """The record's reference answer and its other spellings."""
    out = [record.get("reference") or "", *(record.get("reference_aliases") or [])]
    return [str(r) for r in dict.fromkeys(out) if str(r).strip()]


def has_reference(record: dict[str, Any], text: str) -> bool:
    return any(exact_match(ref, text) for ref in references(record))


def best_f1(record: dict[str, Any], answer: str) -> float:
    return max((token_f1(ref, answer) for ref in references(record)), default=0.0)


def gold_found(record: dict[str, Any]) -> bool:
    """Every gold document of the record is in its evidence (uncapped)."""
    return recall_all(record.get("docs") or [], record.get("gold") or [], None)


def answer_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The answer figures of records with a reference answer (see the module notes)."""
    with_ref = [r for r in records if r.get("reference") and r.get("answerable", True)]
    found = [r for r in with_ref if gold_found(r)]
    judged = [r["answer_judge"] for r in with_ref if r.get("answer_judge") is not None]
    return {
        "answer_first": share([has_reference(r, first_sentence(r.get("answer") or ""))
                               for r in with_ref]),
        "answer_em": share([has_reference(r, r.get("answer") or "") for r in with_ref]),
        "answer_f1": mean([best_f1(r, r.get("answer") or "") for r in with_ref]),
        "answer_words_mean": mean([float(answer_words(r.get("answer") or ""))
                                   for r in with_ref]),
        "answer_first_found": share([has_reference(r, first_sentence(r.get("answer") or ""))
                                     for r in found]),
        "answer_em_found": share([has_reference(r, r.get("answer") or "") for r in found]),
        "found_missed": sum(not has_reference(r, r.get("answer") or "") for r in found)
        if found else None,
        "found_n": len(found),
        "answer_judged": share([bool(j) for j in judged]),
        "judged_n": len(judged),
        "answer_n": len(with_ref),
    }


def token_f1(reference: str, answer: str) -> float:
    ref = _tokens(reference)
    got = _tokens(answer)
    if not ref or not got:
        return float(ref == got)
    counts: dict[str, int] = {}
    for t in ref:
        counts[t] = counts.get(t, 0) + 1
    common = 0
    for t in got:
        if counts.get(t, 0) > 0:
            counts[t] -= 1
            common += 1
    if common == 0:
        return 0.0
    precision, recall = common / len(got), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def abstained(record: dict[str, Any]) -> bool:
    """The run declined to answer, in whole or in part, as the run itself said (`declined`,
    agent/template.py). A record stored before runs said so is read the same way: status
    unanswerable, or a part its answerer declined (`missing`); a free-text answer (no
    `missing`) is read for the language data's decline words (language/lang `decline`, as the
    run reads them); a quoted source sentence holding one of those words is not a decline, which
    is why the stated parts come first."""
    if "declined" in record:
        return bool(record["declined"])
    if record.get("status") == "unanswerable":
        return True
    if record.get("missing") is not None:
        return bool(record["missing"])
    lowered = (record.get("answer") or "").lower()
    return any(m in lowered for m in ENGLISH_WORDS.declined)


# -- numbers ---------------------------------------------------------------------------------

def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: the ceil(p/100 · n)-th smallest value."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def expected_route(qtype: str) -> str | None:
    """Where the router should send a question type; None for unanswerable (not scored)."""
    if qtype == UNANSWERABLE_TYPE:
        return None
    return "single" if qtype in SINGLE_TYPES else "agent"


# -- the grader ------------------------------------------------------------------------------

def grader_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Chunk counts over every GRADE event of the records (see runner.grade_summary)."""
    c = {"seen": 0, "kept": 0, "kept_known": 0, "kept_gold": 0, "gold_seen": 0,
         "gold_seen_kept": 0}
    for r in records:
        gold = set(r.get("gold") or [])
        for g in r.get("grades") or []:
            c["seen"] += int(g.get("chunks", 0))
            c["kept"] += int(g.get("kept", 0))
            kept_docs = g.get("kept_docs")
            if kept_docs is not None:
                c["kept_known"] += len(kept_docs)
                c["kept_gold"] += sum(d in gold for d in kept_docs)
            seen_docs = g.get("seen_docs")
            if seen_docs is not None and kept_docs is not None:
                c["gold_seen"] += sum(d in gold for d in seen_docs)
                c["gold_seen_kept"] += sum(d in gold for d in kept_docs)
    return c


# -- one path --------------------------------------------------------------------------------

def summarize(records: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """All figures for one set of records (one path, optionally one question type)."""
    with_gold = [r for r in records if r.get("gold") and r.get("answerable", True)]
    docs = [r.get("docs") or [] for r in with_gold]
    golds = [r["gold"] for r in with_gold]
    with_sections = [sections_found(r, k) for r in records
                     if r.get("gold_sections") and r.get("answerable", True)]
    unanswerable = [r for r in records if not r.get("answerable", True)]
    answerable = [r for r in records if r.get("answerable", True)]
    scored_routes = [(r, expected_route(r.get("type", ""))) for r in records
                     if r.get("path") == "router"]
    scored_routes = [(r, want) for r, want in scored_routes if want is not None]
    latencies = [float(r.get("latency_s") or 0.0) for r in records]
    counts = grader_counts(records)
    n = len(records)
    return {
        "n": n,
        f"recall@{k}": share([recall_any(d, g, k) for d, g in zip(docs, golds, strict=True)]),
        f"all_gold@{k}": share([recall_all(d, g, k) for d, g in zip(docs, golds, strict=True)]),
        "mrr": mean([reciprocal_rank(d, g, k) for d, g in zip(docs, golds, strict=True)]),
        f"all_gold@{k}_confirmed": share([recall_all(r.get("confirmed_docs", d), r["gold"], k)
                                          for r, d in zip(with_gold, docs, strict=True)]),
        "recall_uncapped": share([recall_any(d, g, None)
                                  for d, g in zip(docs, golds, strict=True)]),
        "all_gold_uncapped": share([recall_all(d, g, None)
                                    for d, g in zip(docs, golds, strict=True)]),
        f"section_recall@{k}": share([any(found) for found in with_sections]),
        f"all_sections@{k}": share([all(found) for found in with_sections]),
        "sections_n": len(with_sections),
        "docs_mean": mean([float(len(d)) for d in docs]),
        "retrieval_n": len(with_gold),
        **answer_figures(records),
        "abstention": share([abstained(r) for r in unanswerable]),
        "answered_anyway": share([not abstained(r) for r in unanswerable]),
        "unanswerable_n": len(unanswerable),
        "false_abstention": share([abstained(r) for r in answerable]),
        "latency_mean_s": mean(latencies),
        "latency_p95_s": percentile(latencies, 95),
        "tokens_mean": mean([float(r.get("tokens") or 0) for r in records]),
        "cost_mean": mean([float(r.get("cost_usd") or 0.0) for r in records]),
        "steps_mean": mean([float(r.get("steps") or 0) for r in records]),
        "used_all_steps_pct": 100.0 * share([used_all_steps(r) for r in records])
        if n else None,
        "truncated_pct": 100.0 * share([r.get("status") == "truncated" for r in records])
        if n else None,
        "failed_pct": 100.0 * share([r.get("status") == "failed" for r in records])
        if n else None,
        "discarded_pct": 100.0 * (counts["seen"] - counts["kept"]) / counts["seen"]
        if counts["seen"] else None,
        "grader_precision": counts["kept_gold"] / counts["kept_known"]
        if counts["kept_known"] else None,
        "grader_recall": counts["gold_seen_kept"] / counts["gold_seen"]
        if counts["gold_seen"] else None,
        **citation_figures(records),
        "router_accuracy": share([r.get("route") == want for r, want in scored_routes]),
        "router_n": len(scored_routes),
    }


def used_all_steps(record: dict[str, Any]) -> bool:
    """The run's steps reached its ceiling (a record without a ceiling never does)."""
    ceiling = int(record.get("max_steps") or 0)
    return ceiling > 0 and int(record.get("steps") or 0) >= ceiling


def citation_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    support = [r["citation_support"] for r in records if r.get("citation_support")]
    checked = sum(int(s.get("checked") or 0) for s in support)
    stated = [s for s in support if s.get("claims")]
    return {
        "citation_precision": sum(int(s.get("supported") or 0) for s in support) / checked
        if checked else None,
        "citations_checked": checked,
        "all_claims_supported": share([bool(s.get("all_supported")) for s in stated]),
        "claims_answers_n": len(stated),
    }


def against_single(records: Sequence[dict[str, Any]], single: dict[str, dict[str, Any]],
                   ks: Sequence[int]) -> dict[str, Any]:
    """lost@k and gained@k of a path's records against single-shot's record of the same
    question (see the module notes); questions single-shot did not run are not counted."""
    out: dict[str, Any] = {}
    with_gold = [r for r in records if r.get("gold") and r.get("answerable", True)]
    paired = [(r, single[str(r["qid"])]) for r in with_gold if str(r.get("qid")) in single]
    for k in ks:
        # per pair: (single-shot has all gold, this path has all gold)
        both = [(recall_all(s.get("docs") or [], r["gold"], k),
                 recall_all(r.get("docs") or [], r["gold"], k)) for r, s in paired]
        lost = sum(had and not has for had, has in both)
        gained = sum(has and not had for had, has in both)
        out[f"lost@{k}"] = lost if paired else None
        out[f"gained@{k}"] = gained if paired else None
        out[f"lost@{k}_pct"] = 100.0 * lost / len(paired) if paired else None
        out[f"gained@{k}_pct"] = 100.0 * gained / len(paired) if paired else None
        out[f"all_gold@{k}"] = share([recall_all(r.get("docs") or [], r["gold"], k)
                                      for r in with_gold])
    return out


def single_ks(k: int) -> list[int]:
    """The depths single-shot is compared at: 5 and the report's k."""
    return sorted({5, k}) if k > 5 else [k]


def _figures(records: Sequence[dict[str, Any]], k: int,
             single: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    figures = summarize(records, k)
    if single is not None:
        figures.update({key: value for key, value in against_single(records, single,
                                                                      single_ks(k)).items()
                        if key not in figures})
    return figures


def build_report(records: Sequence[dict[str, Any]], k: int,
                 paths: Sequence[str] | None = None) -> dict[str, Any]:
    """`{"k", "paths": {path: figures}, "by_type": {type: {path: figures}}}`; with a
    `single` path, every path's figures hold its lost@k / gained@k against it."""
    order = list(paths) if paths else distinct(r["path"] for r in records)
    by_path = {p: [r for r in records if r["path"] == p] for p in order}
    types = sorted({r.get("type", "") for r in records})
    # records without a question id (hand-made ones) have no pairs: no lost / gained figures
    single = ({str(r["qid"]): r for r in by_path["single"] if "qid" in r}
              if "single" in by_path else None)
    return {
        "k": k,
        "paths": {p: _figures(rs, k, single) for p, rs in by_path.items()},
        "by_type": {t: {p: _figures([r for r in rs if r.get("type", "") == t], k, single)
                        for p, rs in by_path.items()} for t in types},
    }


RETRIEVAL_FINE = 0.9
RETRIEVAL_POOR_MISS = 1 / 3


def diagnose(report: dict[str, Any]) -> str | None:
    """The single-shot diagnosis: is retrieval the bottleneck?"""
    single = report["paths"].get("single")
    k = report["k"]
    if not single or single.get(f"recall@{k}") is None:
        return None
    found = single[f"recall@{k}"]
    if found >= RETRIEVAL_FINE:
        return (f"gold documents are in the top {k} for {found:.0%} of questions: retrieval is"
                " not the problem: an agent will not help; look at the prompt/model")
    if 1 - found >= RETRIEVAL_POOR_MISS:
        return (f"gold documents are missing from the top {k} for {1 - found:.0%} of questions:"
                " the loop has work to do")
    return (f"gold documents are missing from the top {k} for {1 - found:.0%} of questions:"
            " an agent may help on the hard types; compare with --paths single,agent")
