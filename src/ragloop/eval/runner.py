"""Run every question of a dataset through each path and record one result line per pair.

Paths: `single` (route single: one search, answer from its top hits), `agent` (route agent:
the loop), `router` (route auto: the router decides). Results are appended to
OUT/results.jsonl as they finish, so an interrupted eval resumes where it stopped: a
(question id, path) pair already in the file is not run again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ragloop.agent.tools_driver import ToolsDriver
from ragloop.core.errors import RagloopError, UserError
from ragloop.core.events import Event, GradeEvent
from ragloop.eval.answer_judge import judge_answer
from ragloop.eval.datasets import Dataset, EvalQuestion
from ragloop.eval.metrics import distinct

if TYPE_CHECKING:
    from ragloop.agent.run import RunResult
    from ragloop.core.config import Settings
    from ragloop.kb import KnowledgeBase
    from ragloop.llm.base import ChatModel
    from ragloop.storage.protocols import RunStore

PATHS = {"single": "single", "agent": "agent", "router": "auto"}
RESULTS_FILE = "results.jsonl"
CONFIG_FILE = "config.json"
# Settings that change what a run does: results made under other values are not resumable.
RUN_KEYS = ("dataset", "model", "driver", "max_steps", "k")


class EvalEngine(Protocol):
    """What the eval needs of an engine (ragloop.agent.engine.Engine is one)."""

    chat: ChatModel | None
    settings: Settings
    kb: KnowledgeBase
    runs: RunStore

    def ask(self, question: str, *, route: str = "auto", driver: str | None = None,
            max_steps: int | None = None,
            on_event: Callable[[Event], None] | None = None) -> RunResult: ...


EngineFactory = Callable[[], EvalEngine]


def parse_paths(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    paths = [p.strip() for p in items if p.strip()]
    bad = [p for p in paths if p not in PATHS]
    if bad or not paths:
        raise UserError(f"--paths takes a comma-separated list of {', '.join(PATHS)};"
                        f" not {', '.join(bad) or repr(text)}")
    return list(dict.fromkeys(paths))


@dataclass
class EvalOptions:
    out: Path
    paths: list[str] = field(default_factory=lambda: ["single", "agent", "router"])
    k: int = 10
    limit: int | None = None
    driver: str | None = None
    max_steps: int | None = None
    workers: int = 1
    progress: bool = False
    fresh: bool = False
    # the model judges each answer against the reference (eval/answer_judge.py); the CLI
    # turns it on when a model is configured
    judge: bool = False


# -- one record ------------------------------------------------------------------------------

def grade_summary(event: GradeEvent, chunk_docs: Callable[[list[int]], dict[int, str]] | None
                  = None) -> dict[str, Any]:
    """What a grade event says about the grader: chunk counts, and the doc_ids of the chunks
    seen and kept when the event names them (pipeline driver: `verdicts`, kept ones first;
    tools driver: `kept_ids`, resolved through `chunk_docs`)."""
    summary: dict[str, Any] = {"chunks": event.chunks, "kept": event.kept, "seen_docs": None,
                               "kept_docs": None}
    if event.verdicts is not None:
        docs = [str(v.get("doc_id")) for v in event.verdicts]
        summary["seen_docs"] = docs
        summary["kept_docs"] = docs[:event.kept]
    elif event.kept_ids is not None and chunk_docs is not None:
        found = chunk_docs(event.kept_ids)
        summary["kept_docs"] = [found[i] for i in event.kept_ids if i in found]
    return summary


def make_record(question: EvalQuestion, path: str, result: RunResult,
                grades: list[dict[str, Any]]) -> dict[str, Any]:
    usage = result.usage
    docs = distinct(str(e["doc_id"]) for e in result.evidence)
    return {
        "qid": question.id, "path": path, "q": question.q, "type": question.type,
        "answerable": question.answerable, "gold": list(question.gold_docs),
        "gold_section": question.gold_section,
        "gold_sections": question.gold_sections, "reference": question.answer,
        "reference_aliases": list(getattr(question, "aliases", [])),
        "run_id": result.run_id, "route": result.route, "route_reason": result.route_reason,
        "driver": result.driver, "model": result.model, "status": str(result.status),
        "answer": result.answer, "docs": docs,
        # the parts the answerer declined, as it stated them; None for a free-text answer (the
        # tools driver's model), whose decline can only be read from its words
        "missing": None if result.driver == ToolsDriver.name else list(result.missing),
        "confirmed_docs": distinct(str(e["doc_id"]) for e in result.evidence
                                   if e.get("confirmed", True)),
        "sections": distinct(f"{e['doc_id']}§{e['section']}" for e in result.evidence),
        "citations": [c.to_dict() for c in result.citations],
        "steps": result.steps, "max_steps": result.max_steps,
        "latency_s": round(float(result.latency_s), 4),
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "tokens": usage.input_tokens + usage.output_tokens,
        "cost_usd": usage.cost_usd, "grades": grades, "error": result.error,
        # the offline support check of the answer's citations (agent/citations.py)
        "citation_support": result.citation_support,
        # the run's own word on whether it declined (metrics.abstained reads it)
        "declined": result.declined,
    }


def crash_record(question: EvalQuestion, path: str, exc: BaseException) -> dict[str, Any]:
    return {
        "qid": question.id, "path": path, "q": question.q, "type": question.type,
        "answerable": question.answerable, "gold": list(question.gold_docs),
        "gold_section": question.gold_section,
        "gold_sections": question.gold_sections, "reference": question.answer,
        "reference_aliases": question.aliases, "run_id": None,
        "route": None, "status": "failed", "answer": "", "docs": [], "confirmed_docs": [],
        "sections": [],
        "citations": [], "steps": 0, "max_steps": 0, "latency_s": 0.0, "input_tokens": 0,
        "output_tokens": 0, "tokens": 0, "cost_usd": 0.0, "grades": [],
        "error": f"{type(exc).__name__}: {exc}",
    }


# -- the results file ------------------------------------------------------------------------

class ResultsFile:
    """OUT/results.jsonl: one JSON line per finished (question, path); append-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def load(self) -> list[dict[str, Any]]:
        """The records so far, first one per (qid, path); a torn last line is ignored."""
        if not self.path.exists():
            return []
        records: dict[tuple[str, str], dict[str, Any]] = {}
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # interrupted mid-write
                if isinstance(rec, dict) and "qid" in rec and "path" in rec:
                    records.setdefault((str(rec["qid"]), str(rec["path"])), rec)
        return list(records.values())

    def repair(self) -> None:
        """Cut a torn last line so the next append starts on a fresh line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[:data.rfind(b"\n") + 1])

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self.lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()


def _check_config(out: Path, config: dict[str, Any], fresh: bool) -> None:
    path = out / CONFIG_FILE
    results = out / RESULTS_FILE
    if fresh and results.exists():
        results.unlink()
    if path.exists() and results.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = [key for key in RUN_KEYS if old.get(key) != config.get(key)]
        if changed:
            detail = ", ".join(f"{key} {old.get(key)!r} → {config.get(key)!r}" for key in changed)
            raise UserError(f"{out} holds results made with other settings ({detail}): pass"
                            " another --out, or --fresh to start over.")
    path.write_text(json.dumps(config, indent=2, default=str) + "\n", encoding="utf-8")


# -- running ---------------------------------------------------------------------------------

def _model_name(engine: EvalEngine) -> str:
    chat = engine.chat
    return chat.name if chat is not None else str(engine.settings.model)


def _rotated(paths: list[str], i: int) -> list[str]:
    i %= max(len(paths), 1)
    return paths[i:] + paths[:i]


def _warm_up(engine: EvalEngine) -> None:
    """Load the embedding model before the clock runs, so the first run does not pay it.
    Past the embedding cache: a cached text would not load the model, and the first question
    with a new text (its first run, on whichever path) would pay the load (~5 s)."""
    engine.kb.warm_up()


def run_one(engine: EvalEngine, question: EvalQuestion, path: str, options: EvalOptions
            ) -> dict[str, Any]:
    events: list[Event] = []
    result = engine.ask(question.q, route=PATHS[path], driver=options.driver,
                        max_steps=options.max_steps, on_event=events.append)
    store = engine.kb.store

    def chunk_docs(ids: list[int]) -> dict[int, str]:
        return {i: h.doc_id for i, h in store.chunks(ids).items()}

    grades = [grade_summary(e, chunk_docs) for e in events if isinstance(e, GradeEvent)]
    record = make_record(question, path, result, grades)
    if options.judge and engine.chat is not None and question.answer and question.answerable:
        # the model judges the answer against the reference (metrics `answer_judged`)
        record["answer_judge"] = judge_answer(engine.chat, question.q,
                                              [question.answer, *question.aliases],
                                              result.answer)
    return record


def _progress(options: EvalOptions) -> Any:
    """The eval's progress bar on stderr (none without `options.progress`)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[what]}", markup=False), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True, emoji=False),
                    disable=not options.progress, transient=True)


Pair = tuple[EvalQuestion, str]


def _run_pairs(todo: list[Pair], work: Callable[[EvalQuestion, str], dict[str, Any]],
               options: EvalOptions,
               on_record: Callable[[dict[str, Any]], None] | None
               ) -> dict[tuple[str, str], dict[str, Any]]:
    """Run every (question, path) of `todo`, in order or on `options.workers` threads."""
    fresh: dict[tuple[str, str], dict[str, Any]] = {}
    bar = _progress(options)
    with bar:
        task = bar.add_task("eval", total=len(todo), what="")
        if options.workers <= 1:
            for q, p in todo:
                bar.update(task, what=f"{p} {q.id}"[:40])
                rec = work(q, p)
                fresh[(q.id, p)] = rec
                bar.update(task, advance=1)
                if on_record:
                    on_record(rec)
            return fresh
        with ThreadPoolExecutor(max_workers=options.workers) as pool:
            futures = {pool.submit(work, q, p): (q, p) for q, p in todo}
            try:
                for fut in as_completed(futures):
                    q, p = futures[fut]
                    rec = fut.result()
                    fresh[(q.id, p)] = rec
                    bar.update(task, advance=1, what=f"{p} {q.id}"[:40])
                    if on_record:
                        on_record(rec)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return fresh


def _in_order(data: Dataset, paths: list[str],
              found: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of `data`'s questions and `paths`, in question order; the dataset is the
    truth for gold, type and reference (it may have been fixed since a record was written)."""
    records = []
    for q in data.questions:
        for p in paths:
            rec = found.get((q.id, p))
            if rec is not None:
                records.append({**rec, "q": q.q, "type": q.type, "answerable": q.answerable,
                                "gold": list(q.gold_docs), "gold_section": q.gold_section,
                                "gold_sections": q.gold_sections,
                                "reference": q.answer, "reference_aliases": q.aliases})
    return records


def run_eval(dataset: Dataset, engine_factory: EngineFactory, options: EvalOptions,
             on_record: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run what OUT/results.jsonl does not hold yet; return the records of this dataset's
    questions and these paths (old and new), in question order."""
    data = dataset.limit(options.limit)
    options.out.mkdir(parents=True, exist_ok=True)
    per_thread: dict[int, EvalEngine] = {}  # one engine per worker thread
    engines_lock = threading.Lock()

    def engine() -> EvalEngine:
        ident = threading.get_ident()
        if ident not in per_thread:
            made = engine_factory()
            with engines_lock:
                per_thread[ident] = made
        return per_thread[ident]

    first = engine()
    config = {"dataset": str(data.source), "kind": data.kind, "model": _model_name(first),
              "driver": options.driver, "max_steps": options.max_steps or
              first.settings.max_steps, "k": options.k}  # single-shot reads k documents
    _check_config(options.out, config, options.fresh)
    results = ResultsFile(options.out / RESULTS_FILE)
    results.repair()
    done = {(r["qid"], r["path"]): r for r in results.load()}
    # the path order rotates per question: a path run after another on the same question finds
    # its query embeddings cached, so a fixed order would flatter the later paths' latency
    todo = [(q, p) for i, q in enumerate(data.questions) for p in _rotated(options.paths, i)
            if (q.id, p) not in done]
    _warm_up(first)

    def work(question: EvalQuestion, path: str) -> dict[str, Any]:
        try:
            record = run_one(engine(), question, path, options)
        except (RagloopError, KeyboardInterrupt):
            raise  # configuration errors stop the eval; an interrupt keeps what is saved
        except Exception as exc:  # a bug in one run must not lose the others
            record = crash_record(question, path, exc)
        results.append(record)
        return record

    fresh = _run_pairs(todo, work, options, on_record)
    return _in_order(data, options.paths, {**done, **fresh})
