"""Eval datasets: seed-style jsonl or a BEIR folder, gold documents resolved to KB doc_ids.

Seed jsonl, one question a line::

    {"q": "...", "gold_doc": "policies/travel.md" | ["a.md", "b.md"], "type": "multi_hop",
     "answer": "...", "gold_section": "4.2", "id": "q7"}

``gold_pairs`` (``[["policies/travel.md", "4.2"], ...]``) names the gold sections exactly; without
it, ``gold_section`` (one id or a list) is paired with a single gold document, or with as many
gold documents in the same order.

BEIR folder: ``corpus.jsonl`` (``{_id, title, text}``), ``queries.jsonl`` (``{_id, text, ...}``)
and ``qrels/*.tsv`` (query-id, corpus-id, score; a header line is allowed). Extra query fields
(``answer``, ``type``, ``answerable``, ``gold_doc_ids``) are kept.

Gold documents may be named by doc_id, file name or path; :func:`resolve_gold` maps each to a
doc_id of the knowledge base by exact, then suffix, then basename (then stem) match.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ragloop.core.errors import UserError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.core.unicode import clean_text, is_text

if TYPE_CHECKING:
    from ragloop.kb import KnowledgeBase

# Question types a single search is expected to answer; every other type needs the agent.
SINGLE_TYPES = ("simple",)
UNANSWERABLE_TYPE = "unanswerable"
DEFAULT_TYPE = "simple"


@dataclass
class EvalQuestion:
    id: str
    q: str
    type: str = DEFAULT_TYPE
    gold_docs: list[str] = field(default_factory=list)  # KB doc_ids once resolved
    answer: str | None = None  # reference answer
    gold_section: str | None = None
    gold_sections: list[list[str]] = field(default_factory=list)  # [doc, section] pairs
    answerable: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # gold names no KB doc_id matched

    @property
    def aliases(self) -> list[str]:
        """Other spellings of the reference answer (`answer_aliases`), without the reference."""
        raw = self.extra.get("answer_aliases") or []
        items = [raw] if isinstance(raw, str) else list(raw)
        return [str(a) for a in dict.fromkeys(items) if str(a).strip() and str(a) != self.answer]

    @property
    def needs_agent(self) -> bool:
        """What the router should decide: types other than simple and unanswerable need it."""
        return self.type not in (*SINGLE_TYPES, UNANSWERABLE_TYPE)


@dataclass
class Dataset:
    name: str
    kind: str  # "seed" | "beir"
    source: Path
    questions: list[EvalQuestion]
    corpus: Path | None = None  # BEIR corpus.jsonl

    def limit(self, n: int | None) -> Dataset:
        if n is None:
            return self
        return Dataset(self.name, self.kind, self.source, self.questions[:n], self.corpus)


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise UserError(f"{path}:{line_no}: expected a JSON object per line")
            yield line_no, obj


def _as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v) != ""]
    return [str(value)]


def _gold_pairs(obj: dict[str, Any], gold: list[str]) -> list[list[str]]:
    """[doc, section] pairs: `gold_pairs` as given, else `gold_section` paired with the gold
    documents when that pairing is unambiguous (one document, or one section per document)."""
    pairs = obj.get("gold_pairs")
    if isinstance(pairs, list):
        return [[str(p[0]), str(p[1])] for p in pairs
                if isinstance(p, list | tuple) and len(p) == 2]
    sections = _as_list(obj.get("gold_section"))
    if not sections or not gold:
        return []
    if len(gold) == 1:
        return [[gold[0], s] for s in sections]
    if len(gold) == len(sections):
        return [[d, s] for d, s in zip(gold, sections, strict=True)]
    return []


def _section_label(value: Any) -> str | None:
    sections = _as_list(value)
    return ", ".join(sections) if sections else None


def _answerable(obj: dict[str, Any], qtype: str) -> bool:
    if "answerable" in obj and obj["answerable"] is not None:
        raw = obj["answerable"]
        return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
    return qtype != UNANSWERABLE_TYPE


def _unique_ids(questions: list[EvalQuestion]) -> None:
    seen: dict[str, int] = {}
    for q in questions:
        if q.id in seen:
            seen[q.id] += 1
            q.id = f"{q.id}#{seen[q.id]}"
        else:
            seen[q.id] = 1


def load_seed(path: Path) -> Dataset:
    questions: list[EvalQuestion] = []
    for line_no, obj in read_jsonl(path):
        text = obj.get("q") or obj.get("question") or obj.get("text")
        if not text:
            raise UserError(f"{path}:{line_no}: a question needs a \"q\" field")
        qtype = str(obj.get("type") or DEFAULT_TYPE)
        gold = _as_list(obj.get("gold_doc", obj.get("gold_docs", obj.get("gold_doc_ids"))))
        qid = str(obj.get("id") or obj.get("_id")
                  or hashlib.sha1(str(text).encode()).hexdigest()[:10])
        known = {"q", "question", "text", "type", "gold_doc", "gold_docs", "gold_doc_ids",
                 "answer", "gold_section", "gold_pairs", "id", "_id", "answerable"}
        questions.append(EvalQuestion(
            id=qid, q=str(text), type=qtype, gold_docs=gold,
            answer=str(obj["answer"]) if obj.get("answer") not in (None, "") else None,
            gold_section=_section_label(obj.get("gold_section")),
            gold_sections=_gold_pairs(obj, gold),
            answerable=_answerable(obj, qtype),
            extra={k: v for k, v in obj.items() if k not in known}))
    _unique_ids(questions)
    return Dataset(path.stem, "seed", path, questions)


def _read_qrels(folder: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    for tsv in sorted((folder / "qrels").glob("*.tsv")):
        with tsv.open(encoding="utf-8") as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 2 or parts[0] in ("query-id", "query_id", "qid"):
                    continue
                try:
                    score = float(parts[2]) if len(parts) > 2 and parts[2] else 1.0
                except ValueError:
                    continue  # a header we did not recognise
                if score > 0:
                    docs = gold.setdefault(parts[0], [])
                    if parts[1] not in docs:
                        docs.append(parts[1])
    return gold


def load_beir(folder: Path) -> Dataset:
    queries = folder / "queries.jsonl"
    corpus = folder / "corpus.jsonl"
    if not queries.exists():
        raise UserError(f"{folder}: a BEIR folder needs queries.jsonl (and corpus.jsonl, qrels/)")
    qrels = _read_qrels(folder)
    questions: list[EvalQuestion] = []
    for line_no, obj in read_jsonl(queries):
        if "_id" not in obj or "text" not in obj:
            raise UserError(f"{queries}:{line_no}: a BEIR query needs \"_id\" and \"text\"")
        qid = str(obj["_id"])
        gold = list(qrels.get(qid, []))
        for g in _as_list(obj.get("gold_doc_ids")):
            if g not in gold:
                gold.append(g)
        qtype = str(obj.get("type") or DEFAULT_TYPE)
        questions.append(EvalQuestion(
            id=qid, q=str(obj["text"]), type=qtype, gold_docs=gold,
            answer=str(obj["answer"]) if obj.get("answer") not in (None, "") else None,
            gold_section=str(obj["gold_section"]) if obj.get("gold_section") else None,
            answerable=_answerable(obj, qtype),
            extra={k: v for k, v in obj.items()
                   if k not in ("_id", "text", "type", "answer", "gold_section", "answerable")}))
    _unique_ids(questions)
    return Dataset(folder.name, "beir", folder, questions, corpus if corpus.exists() else None)


def load_dataset(path: str | Path) -> Dataset:
    """A seed-style jsonl file or a BEIR folder (or a BEIR queries.jsonl inside one)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such dataset file or folder")
    if p.is_dir():
        return load_beir(p)
    if p.name == "queries.jsonl" and (p.parent / "qrels").is_dir():
        return load_beir(p.parent)
    return load_seed(p)


# -- gold document names ---------------------------------------------------------------------

def _norm(name: str) -> str:
    return name.replace("\\", "/").strip().lstrip("./").lower()


def resolve_doc_name(name: str, doc_ids: list[str]) -> str | None:
    """The doc_id `name` means: exact; else a suffix match at a path boundary
    (`kb/policies/x.md` names `policies/x.md`, the longest such doc_id winning; `x/y.md` names
    `docs/x/y.md`); else the same file name; else the same stem. None when nothing, or more
    than one doc_id, matches at the first level that matches."""
    if name in doc_ids:
        return name
    target = _norm(name)
    lowered = {d: _norm(d) for d in doc_ids}

    def one(found: list[str]) -> str | bool | None:
        """The match, None when ambiguous, False when there is none."""
        if len(found) == 1:
            return found[0]
        return None if found else False

    exact = one([d for d, low in lowered.items() if low == target])
    if exact is not False:
        return exact  # type: ignore[return-value]
    inside = [d for d, low in lowered.items() if target.endswith("/" + low)]
    if inside:
        longest = max(len(lowered[d]) for d in inside)
        return one([d for d in inside if len(lowered[d]) == longest]) or None
    levels = [
        lambda low: low.endswith("/" + target),
        lambda low: PurePosixPath(low).name == PurePosixPath(target).name,
        lambda low: PurePosixPath(low).stem == PurePosixPath(target).stem,
    ]
    for match in levels:
        found = one([d for d, low in lowered.items() if match(low)])
        if found is not False:
            return found  # type: ignore[return-value]
    return None


def resolve_gold(dataset: Dataset, doc_ids: list[str]) -> list[tuple[str, str]]:
    """Rewrite every question's gold names to KB doc_ids; returns (question id, name) pairs
    that matched nothing (they stay in `unresolved` and count as never retrieved)."""
    misses: list[tuple[str, str]] = []
    for q in dataset.questions:
        resolved: list[str] = []
        q.unresolved = []
        for name in q.gold_docs:
            doc = resolve_doc_name(name, doc_ids)
            if doc is None:
                q.unresolved.append(name)
                misses.append((q.id, name))
            elif doc not in resolved:
                resolved.append(doc)
        q.gold_docs = resolved + q.unresolved
        q.gold_sections = [[resolve_doc_name(d, doc_ids) or d, sec] for d, sec in q.gold_sections]
    return misses


# -- BEIR corpus -> knowledge base -----------------------------------------------------------

def iter_corpus(path: Path) -> Iterator[ParsedDocument]:
    """One document per corpus line, one section ("0") titled by the record's title."""
    for line_no, obj in read_jsonl(path):
        if "_id" not in obj:
            raise UserError(f"{path}:{line_no}: a corpus record needs \"_id\"")
        if not is_text(str(obj["_id"])):
            raise UserError(f"{path}:{line_no}: the \"_id\" holds a lone surrogate escape"
                            " (not valid Unicode); fix that line")
        # a lone surrogate in the text cannot be stored: U+FFFD, as `ragloop ingest` does
        title = clean_text(obj.get("title") or "").strip()
        text = clean_text(obj.get("text") or "").strip()
        if not text and not title:
            continue
        yield ParsedDocument(doc_id=str(obj["_id"]), title=title or str(obj["_id"]),
                             source=f"{path.name}:{line_no}",
                             sections=[SectionText("0", (title,) if title else (), text or title)])


def ingest_corpus(kb: KnowledgeBase, corpus: Path, progress: bool = False) -> int:
    """Add the corpus documents the knowledge base does not hold yet (by doc_id), through the
    ingest write path; returns how many were written."""
    known = kb.store.content_hashes()
    todo = [d for d in iter_corpus(corpus) if d.doc_id not in known]
    if not todo:
        return 0
    return kb.ingest_documents(todo, progress=progress, label="ingest corpus").added
