"""The `ragloop` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ragloop.core.config import Settings
from ragloop.core.errors import RagloopError, UserError

if TYPE_CHECKING:
    from ragloop.core.events import Event
    from ragloop.eval.datasets import Dataset
    from ragloop.kb import KnowledgeBase
    from ragloop.storage.protocols import Backend

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ragloop: agentic RAG over a local knowledge base.")
# Data (titles, questions, chunk text, file names) is printed escaped or as Text, and no
# `:name:` in it turns into an emoji: a `[/]` in a title must not break `ragloop docs`.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)

KbOpt = Annotated[str | None, typer.Option(
    "--kb", help="Knowledge base: a folder (SQLite) or a postgresql://… URL"
    " [env RAGLOOP_KB, default ./kb].")]
EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder",
    help="local:all-MiniLM-L6-v2 (default for English), local:multilingual-e5-small (default"
    " for other languages) or openai:<model> [env RAGLOOP_EMBEDDER].")]
LanguageOpt = Annotated[str | None, typer.Option(
    "--language",
    help="The knowledge base's language for a new KB: en, it, fr, de, es, zh, ja, he, …, or"
    " mixed; default: detected from the first documents [env RAGLOOP_LANGUAGE].")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ModelOpt = Annotated[str | None, typer.Option(
    help="offline | anthropic:<model> | openai:<model> | ollama:<model>")]
GraderModelOpt = Annotated[str | None, typer.Option(help="A cheaper model to grade.")]
BaseUrlOpt = Annotated[str | None, typer.Option(
    help="OpenAI-compatible server, e.g. http://localhost:11434/v1")]
StrictOpt = Annotated[float | None, typer.Option(
    "--strict", min=0.0, max=1.0,
    help="Offline answers: how closely a sentence must match a part before it is stated"
         " (0..1; higher declines more) [env RAGLOOP_STRICTNESS, default 0.34].")]


def settings_for(kb: str | Path | None, **changes: object) -> Settings:
    return Settings.from_env().with_(kb=str(kb) if kb else None, **changes)


def open_kb(kb: str | None, embedder: str | None = None, create: bool = False,
            language: str | None = None) -> KnowledgeBase:
    """Only ingest creates a knowledge base: elsewhere a mistyped --kb is an error."""
    from ragloop.kb import KnowledgeBase

    settings = settings_for(kb, embedder=embedder, language=language)
    return KnowledgeBase.open(settings.kb, settings, create=create)


def emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


@app.command()
def ingest(paths: Annotated[list[Path], typer.Argument(help="Files or folders (recursive).")],
           kb: KbOpt = None, embedder: EmbedderOpt = None, language: LanguageOpt = None,
           as_json: JsonOpt = False) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    with open_kb(kb, embedder, create=True, language=language) as base:
        report = base.ingest(paths, progress=not as_json and err.is_terminal)
    if as_json:
        emit_json(report.to_dict())
    else:
        for path, reason in report.failed:
            err.print(f"[yellow]skipped[/] {escape(path)}: {escape(reason)}")
        out.print(escape(report.summary()))
    if report.failed and not (report.added or report.updated or report.unchanged):
        raise typer.Exit(1)


@app.command()
def rm(doc_id: str, kb: KbOpt = None) -> None:
    """Delete a document and its chunks."""
    with open_kb(kb) as base:
        if not base.remove(doc_id):
            raise UserError(f"No document {doc_id!r}; `ragloop docs` lists the doc_ids.")
    out.print(f"removed {escape(doc_id)}")


@app.command()
def search(query: str, k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 8,
           mode: Annotated[str, typer.Option(help="hybrid | bm25 | vector")] = "hybrid",
           kb: KbOpt = None, embedder: EmbedderOpt = None, as_json: JsonOpt = False) -> None:
    """Hybrid search (BM25 + vectors, fused by reciprocal rank fusion)."""
    from ragloop.retrieval.fusion import MODES

    if mode not in MODES:
        raise UserError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    with open_kb(kb, embedder) as base:
        hits = base.search(query, k, mode)  # type: ignore[arg-type]
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    if not hits:
        out.print("no hits")
    for i, h in enumerate(hits, start=1):
        ranks = (f"bm25 #{h.bm25_rank if h.bm25_rank else '-'}"
                 f"  vector #{h.vector_rank if h.vector_rank else '-'}")
        out.print(f"[bold]{i}. {escape(h.doc_id)} §{escape(h.section)}[/] {escape(h.section_title)}"
                  f"  [dim]score {h.score:.4f}  {ranks}[/]")
        snippet = " ".join(h.text.split())
        out.print(f"   {escape(snippet[:240])}{'…' if len(snippet) > 240 else ''}")


@app.command()
def docs(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """List documents with their section and chunk counts."""
    with open_kb(kb) as base:
        documents = base.documents()
    if as_json:
        emit_json([d.to_dict() for d in documents])
        return
    table = Table("doc_id", "title", "source", "sections", "chunks", box=None)
    for d in documents:
        table.add_row(Text(d.doc_id), Text(d.title), Text(d.source), str(d.sections),
                      str(d.chunks))
    out.print(table)
    out.print(f"{len(documents)} documents, {sum(d.chunks for d in documents)} chunks")


@app.command()
def section(doc_id: str, section_id: Annotated[str, typer.Argument(metavar="SECTION")],
            kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Print the whole text of one section."""
    with open_kb(kb) as base:
        found = base.section(doc_id, section_id)
    if as_json:
        emit_json(found.to_dict())
        return
    out.print(f"[bold]{escape(found.doc_id)} §{escape(found.section)}[/] "
              f"{escape(' > '.join(found.title_path))}\n")
    out.print(escape(found.text))


def print_event(event: Event, debug: bool) -> None:
    from ragloop.agent.run import log_line
    from ragloop.core.events import ErrorEvent, GradeEvent, PlanEvent, RewriteEvent, RouteEvent

    line = log_line(event)
    if line:  # one physical line per tool call whatever the width, so `grep step=` works
        err.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        return
    if not debug:
        return
    if isinstance(event, RouteEvent):
        err.print(f"[cyan]route[/] {escape(event.route)}: {escape(event.reason)}")
    elif isinstance(event, PlanEvent):
        err.print(f"[cyan]plan[/] need_search={event.need_search} "
                  f"sub_questions={escape(json.dumps(event.sub_questions, ensure_ascii=False))}"
                  f" {escape(event.reason or '')}")
    elif isinstance(event, GradeEvent):
        verdicts = ", ".join(f"{v['doc_id']} §{v['section']}={v['verdict']}"
                             f"({(v.get('score') or 0):.2f})" for v in event.verdicts or [])
        err.print(f"[cyan]grade[/] kept {event.kept}/{event.chunks} enough={event.enough}"
                  f" missing={escape(repr(event.missing or ''))}"
                  f" next_query={escape(repr(event.next_query))}")
        if verdicts:
            err.print(f"  [dim]{escape(verdicts)}[/]")
    elif isinstance(event, RewriteEvent):
        err.print(f"[cyan]rewrite[/] from gap {escape(repr(event.missing))} → "
                  f"{escape(repr(event.query))}")
    elif isinstance(event, ErrorEvent):
        err.print(f"[red]error[/] {escape(event.error)}")


def print_run(result: dict[str, Any]) -> None:
    out.print(f"\n[bold]{escape(result['answer'])}[/]\n")
    for c in result["citations"]:
        out.print(f"[{c['n']}] → {escape(c['doc_id'])} §{escape(c['section'])}")
    if result.get("closest"):
        out.print("\nClosest passages (not confirmed):")
        for c in result["closest"]:
            out.print(f"- {escape(c['doc_id'])} §{escape(c['section'])}: {escape(c['text'])}")
    if result.get("invalid_citations"):
        out.print(f"[yellow]removed invalid citations:"
                  f" {escape(str(result['invalid_citations']))}[/]")
    for u in result.get("unsupported") or []:
        out.print(f"[yellow]removed unsupported citation [{u['n']}]: its passage does not"
                  f" support \"{escape(u['sentence'])}\"[/]")
    if result.get("citations_unchecked"):
        out.print("[yellow]citations not checked: the model's verdict was unreadable[/]")
    usage = result["usage"]
    out.print(f"\n[dim]status={result['status']} route={escape(str(result['route']))} "
              f"({escape(result.get('route_reason') or '')}) steps={result['steps']}"
              f"/{result['max_steps']} latency={result['latency_s']:.2f}s "
              f"tokens in={usage['input_tokens']} out={usage['output_tokens']} "
              f"cached={usage['cache_read_tokens']} cost=${usage['cost_usd']:.4f} "
              f"run={escape(result['run_id'])}[/]")


@app.command()
def ask(question: str,
        model: ModelOpt = None,
        grader_model: GraderModelOpt = None,
        driver: Annotated[str | None, typer.Option(help="tools | pipeline")] = None,
        max_steps: Annotated[int | None, typer.Option(help="Step ceiling (default 6).")] = None,
        route: Annotated[str, typer.Option(help="auto | single | agent")] = "auto",
        base_url: BaseUrlOpt = None,
        kb: KbOpt = None, as_json: JsonOpt = False,
        debug: Annotated[bool, typer.Option(help="Show plan, verdicts, rewrites.")] = False,
        strict: StrictOpt = None,
        ) -> None:
    """Answer a question with cited evidence (agent loop with a step ceiling)."""
    from ragloop.agent.engine import Engine
    from ragloop.kb import KnowledgeBase

    settings = settings_for(kb, model=model, grader_model=grader_model, base_url=base_url,
                            strictness=strict)
    with KnowledgeBase.open(settings.kb, settings, create=False) as base:
        engine = Engine(base, settings, base.backend.runs)
        result = engine.ask(question, route=route, driver=driver, max_steps=max_steps,
                            on_event=None if as_json else lambda e: print_event(e, debug))
    data = result.to_dict()
    if as_json:
        emit_json(data)
    else:
        print_run(data)
    if result.status == "failed":
        raise typer.Exit(1)


def open_backend(kb: str | None) -> Backend:
    """The storage of an existing knowledge base (its runs are read without its indexes)."""
    from ragloop.storage.backend import open_backend as open_at

    return open_at(settings_for(kb).kb, create=False)


@app.command()
def runs(run_id: Annotated[str | None, typer.Argument(help="Show one run in full.")] = None,
         limit: Annotated[int, typer.Option(help="How many recent runs.")] = 20,
         kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """List recent runs, or show one with its events."""
    backend = open_backend(kb)
    try:
        store = backend.runs
        if run_id is None:
            rows = store.list(limit)
            if as_json:
                emit_json(rows)
                return
            table = Table("run", "status", "route", "steps", "latency", "question", box=None)
            for r in rows:
                table.add_row(Text(r["run_id"]), Text(r["status"]), Text(r["route"] or ""),
                              str(r["steps"]), f"{(r['latency_s'] or 0):.2f}s",
                              Text(r["question"][:70]))
            out.print(table)
            return
        run = store.get(run_id)
        if run is None:
            raise UserError(f"No run {run_id!r}; `ragloop runs` lists them.")
        events = [e.to_dict() for e in store.events(run_id)]
    finally:
        backend.close()
    if as_json:
        emit_json({**run, "events": events})
        return
    out.print(f"[bold]{escape(run['question'])}[/]  [dim]{escape(run['run_id'])}"
              f" {escape(run['status'])}[/]")
    for e in events:
        out.print(f"  step={e['step']} {escape(e['kind'])} "
                  f"{escape(json.dumps(e['data'], ensure_ascii=False)[:300])}")
    out.print(f"\n{escape(run['answer'] or '')}")


@app.command()
def stats(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Dashboard figures: mean steps, % of runs that used every step, % forced to answer, % of
    chunks discarded, latency."""
    backend = open_backend(kb)
    try:
        m = backend.runs.metrics()
    finally:
        backend.close()
    if as_json:
        emit_json(m.to_dict())
        return
    out.print(f"runs                       {m.runs}")
    out.print(f"mean steps per question    {m.mean_steps:.2f}")
    out.print(f"runs that used every step  {m.used_all_steps_pct:.1f}%")
    out.print(f"runs forced to answer      {m.truncated_pct:.1f}%  (status truncated)")
    out.print(f"chunks discarded by grader {m.discarded_pct:.1f}%")
    out.print(f"mean latency               {m.mean_latency_s:.2f} s")
    out.print(f"mean cost per question     ${m.mean_cost_usd:.4f}")
    out.print(f"by status                  {escape(str(m.by_status))}")
    if m.warn_truncated:
        err.print(f"[yellow]warning:[/] {m.truncated_pct:.0f}% of runs were forced to answer at"
                  " MAX_STEPS (above 10%): raise --max-steps or look at what the searches miss"
                  " (`ragloop runs`).")
    elif m.warn_used_all_steps:
        err.print(f"[yellow]warning:[/] {m.used_all_steps_pct:.0f}% of runs used every step"
                  " (above 10%): look at what the spare steps searched for (`ragloop runs`).")


def _eval_corpus(base: KnowledgeBase, data: Dataset, *, progress: bool,
                 quiet: bool) -> list[tuple[str, str]]:
    """Ingest the dataset's corpus when it has one, then resolve its gold names against the
    KB's documents: the (question, name) pairs that did not resolve, each warned about."""
    from ragloop.eval.datasets import ingest_corpus, resolve_gold

    if data.corpus is not None:
        added = ingest_corpus(base, data.corpus, progress=progress)
        if added and not quiet:
            err.print(f"ingested {added} corpus documents into {escape(str(base.settings.kb))}")
    doc_ids = [d.doc_id for d in base.documents()]
    if not doc_ids:
        raise UserError(f"The knowledge base {base.settings.kb} is empty: ingest the documents"
                        f" first (`ragloop ingest PATH --kb {base.settings.kb}`).")
    misses = resolve_gold(data, doc_ids)
    for qid, name in misses[:10]:
        err.print(f"[yellow]warning:[/] question {escape(qid)}: gold document"
                  f" {escape(repr(name))} is not in the knowledge base")
    if len(misses) > 10:
        err.print(f"[yellow]warning:[/] {len(misses)} gold names did not resolve in all")
    return misses


@app.command(name="eval")
def eval_(dataset: Annotated[Path, typer.Argument(
              help="Seed-style .jsonl ({q, gold_doc, type, answer?}) or a BEIR folder.")],
          kb: KbOpt = None,
          paths: Annotated[str, typer.Option(
              help="Comma-separated: single (one search), agent (the loop), router (auto).")]
          = "single,agent,router",
          k: Annotated[int, typer.Option("-k", help="Documents counted for recall@k / MRR.")] = 10,
          model: ModelOpt = None,
          grader_model: GraderModelOpt = None,
          driver: Annotated[str | None, typer.Option(help="tools | pipeline")] = None,
          max_steps: Annotated[int | None, typer.Option(help="Step ceiling (default 6).")] = None,
          base_url: BaseUrlOpt = None,
          limit: Annotated[int | None, typer.Option(help="Only the first N questions.")] = None,
          out_dir: Annotated[Path | None, typer.Option(
              "--out", help="Results folder [default ./eval-results/<dataset>].")] = None,
          workers: Annotated[int | None, typer.Option(
              help="Parallel runs [default 1 offline, 4 with a remote model].")] = None,
          fresh: Annotated[bool, typer.Option(help="Discard earlier results in --out.")]
          = False,
          embedder: EmbedderOpt = None, as_json: JsonOpt = False,
          strict: StrictOpt = None) -> None:
    """Evaluate single-shot vs agent vs router: recall@k, MRR, answers, cost, latency.

    Resumable: results go to OUT/results.jsonl as they finish; a rerun skips finished pairs.
    Writes OUT/report.json, OUT/report.md and OUT/report.html (plots)."""
    from ragloop.agent.engine import Engine
    from ragloop.eval.datasets import load_dataset
    from ragloop.eval.metrics import build_report, diagnose
    from ragloop.eval.report import markdown, to_json, write_reports
    from ragloop.eval.runner import EvalOptions, parse_paths, run_eval
    from ragloop.kb import KnowledgeBase

    chosen = parse_paths(paths)
    if k < 1:
        raise UserError("-k must be at least 1")
    data = load_dataset(dataset)
    settings = settings_for(kb, model=model, grader_model=grader_model, base_url=base_url,
                            embedder=embedder, strictness=strict)
    progress = not as_json and err.is_terminal
    with KnowledgeBase.open(settings.kb, settings) as base:
        misses = _eval_corpus(base, data, progress=progress, quiet=as_json)
        offline = settings.model.strip().lower() in ("offline", "none", "")
        options = EvalOptions(out=out_dir or Path("eval-results") / data.name, paths=chosen,
                              k=k, limit=limit, driver=driver, max_steps=max_steps,
                              workers=workers or (1 if offline else 4), progress=progress,
                              fresh=fresh)
        try:
            # single-shot reads the top k of its search: the same k its recall is counted at
            at_k = settings.with_(single_k=k)
            records = run_eval(data, lambda: Engine(base, at_k), options)
        except KeyboardInterrupt:
            err.print(f"\n[yellow]interrupted:[/] finished results are in"
                      f" {escape(str(options.out / 'results.jsonl'))}; run the same command"
                      " again to resume.")
            raise typer.Exit(130) from None
    report = build_report(records, k, chosen)
    notes = []
    if chosen == ["single"]:
        line = diagnose(report)
        if line:
            notes.append(line)
    if misses:
        notes.append(f"{len(misses)} gold document name(s) did not match a doc_id of the"
                     " knowledge base: those questions count as misses.")
    report = {"dataset": str(dataset), "model": records[0].get("model") if records else None,
              **report, "notes": notes}
    files = write_reports(options.out, report, records, title=f"ragloop eval: {data.name}")
    if as_json:
        emit_json(to_json(report))
        return
    out.print(escape(markdown(report)))
    for note in notes:
        out.print(f"\n[bold]{escape(note)}[/]")
    out.print(f"\n[dim]{len(records)} results in {escape(str(options.out / 'results.jsonl'))};"
              f" report: {escape(str(files['html']))}[/]")


@app.command()
def serve(host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="Port.")] = 8000,
          model: ModelOpt = None,
          grader_model: GraderModelOpt = None,
          base_url: BaseUrlOpt = None,
          kb: KbOpt = None,
          workers: Annotated[int, typer.Option(
              help="Runs executed at once by this server.")] = 2,
          no_local_workers: Annotated[bool, typer.Option(
              "--no-local-workers",
              help="Postgres only: only enqueue runs; `ragloop worker` processes run them.")]
          = False) -> None:
    """HTTP API + live run page + dashboard. Beyond loopback, RAGLOOP_API_KEY is required.

    With a postgresql:// --kb, POST /runs enqueues the run in the database and any server's
    or worker's queue loop takes it; this server runs --workers such loops itself unless
    --no-local-workers."""
    import os

    from ragloop.apps.server.app import API_KEY_ENV
    from ragloop.apps.server.app import serve as run_server

    settings = settings_for(kb, model=model, grader_model=grader_model, base_url=base_url)
    run_server(settings, host=host, port=port, api_key=os.environ.get(API_KEY_ENV) or None,
               workers=workers, local_workers=0 if no_local_workers else None)


@app.command()
def worker(kb: KbOpt = None,
           model: ModelOpt = None,
           grader_model: GraderModelOpt = None,
           base_url: BaseUrlOpt = None,
           lease: Annotated[float, typer.Option(
               help="Seconds a claimed run stays ours without a heartbeat; a run whose worker"
                    " died is queued again after this.")] = 30.0,
           poll: Annotated[float, typer.Option(
               help="Seconds between queue checks when no NOTIFY arrives.")] = 2.0,
           max_runs: Annotated[int | None, typer.Option(
               help="Exit after this many runs (default: run until stopped).")] = None,
           event_delay: Annotated[float, typer.Option(hidden=True)] = 0.0) -> None:
    """Run queued runs from a Postgres knowledge base (start as many as you like).

    Each run is taken by exactly one worker (SELECT … FOR UPDATE SKIP LOCKED) and kept alive
    by a heartbeat; if a worker dies its run is queued again (up to 3 attempts, then failed).
    Stops after the current run on SIGTERM / Ctrl-C."""
    import logging
    import os
    import signal
    import threading

    from ragloop.apps.worker import run_worker

    settings = settings_for(kb, model=model, grader_model=grader_model, base_url=base_url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():  # second signal: stop now; the lease running out re-queues the run
            os._exit(128 + signum)
        err.print("[yellow]stopping after the current run[/] (again to stop now)")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    done = run_worker(settings, lease_s=lease, poll_s=poll, max_runs=max_runs,
                      event_delay_s=event_delay, stop=stop)
    err.print(f"worker stopped after {done} run(s)")


@app.command(name="check-model")
def check_model_cmd(model: Annotated[str | None, typer.Argument(
                        help="provider:model (default: RAGLOOP_MODEL, or the default for the"
                             " API key that is set)")] = None,
                    base_url: BaseUrlOpt = None) -> None:
    """Check in seconds that a model works for the agent: one tool call, then a forced answer."""
    from ragloop.apps.check_model import check_model
    from ragloop.llm import make_chat_model

    settings = settings_for(None, model=model, base_url=base_url)
    chat = make_chat_model(settings.model, settings)
    if chat is None:
        raise UserError("check-model needs a model: pass one (e.g. anthropic:claude-sonnet-5-5,"
                        " openai:gpt-5.4-mini, ollama:qwen3, llamacpp:<alias>) or set"
                        " RAGLOOP_MODEL; 'offline' needs no check")
    steps = check_model(chat, max_tokens=settings.loop_max_tokens)
    for step in steps:
        mark = "[green]ok[/]" if step.ok else "[red]FAILED[/]"
        out.print(f"{mark} {step.name} ({step.seconds:.1f}s): ", end="")
        out.print(Text(step.detail))
    if all(s.ok for s in steps) and len(steps) == 2:
        out.print(f"{escape(chat.name)} works with ragloop's tools loop.")
        return
    raise typer.Exit(1)


@app.command(name="migrate")
def migrate_(src: Annotated[str, typer.Argument(help="Source: a folder or postgresql:// URL.")],
             dst: Annotated[str, typer.Argument(help="Destination: a folder or URL.")],
             as_json: JsonOpt = False) -> None:
    """Copy a knowledge base between SQLite and Postgres (either way): vectors and runs too."""
    from ragloop.storage.migrate import migrate

    report = migrate(src, dst)
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(escape(report.summary()))


@app.command()
def mcp(model: Annotated[str | None, typer.Option(
            help="Model for the ask tool: offline | anthropic:<model> | openai:<model>")] = None,
        kb: KbOpt = None) -> None:
    """The knowledge base's tools as an MCP server over stdio (Claude Desktop / Code)."""
    from ragloop.apps.mcp_server import run as run_mcp

    run_mcp(settings_for(kb, model=model))


def main() -> None:
    try:
        app()
    except UserError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(2)
    except RagloopError as exc:
        err.print(f"[red]failed:[/] {escape(str(exc))}")
        sys.exit(1)


if __name__ == "__main__":
    main()
