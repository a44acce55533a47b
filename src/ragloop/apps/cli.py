"""The `ragloop` command line."""

from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import SecretStr
from rich.table import Table
from rich.text import Text

from ragloop.apps.cli_base import (
    JsonOpt,
    KbOpt,
    _Command,
    _Group,
    emit_json,
    env_hint,
    err,
    open_backend,
    out,
    settings_for,
)
from ragloop.apps.kb_options import CatalogOpt, KbsOpt, Served
from ragloop.apps.terminal import one_line, shown, tsv_field, visible
from ragloop.core.access import ACCESS_KEY, Principal
from ragloop.core.config import MIN_STEPS, RunOptions, Settings, option_help
from ragloop.core.conversation import numbered
from ragloop.core.errors import RagloopError, UserError
from ragloop.core.types import usage_summary

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ragloop.apps.answer_printer import AnswerPrinter
    from ragloop.core.events import Event
    from ragloop.eval.datasets import Dataset
    from ragloop.ingest.pipeline import IngestReport
    from ragloop.kb import KnowledgeBase
    from ragloop.kb.multi import KnowledgeBases


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_Group,
                  help="ragloop: agentic RAG over a local knowledge base.")
command = functools.partial(app.command, cls=_Command)

# search filters (retrieval/filters.py)
SourceOpt = Annotated[list[str] | None, typer.Option(
    "--source", help="Only documents whose source path or URL matches this glob or lies under"
    " it (repeatable: any of them).")]
DocPrefixOpt = Annotated[list[str] | None, typer.Option(
    "--doc-prefix", help="Only documents whose doc_id starts with this (repeatable).")]
WhereOpt = Annotated[list[str] | None, typer.Option(
    "--where", help="Only documents with this metadata, KEY=VALUE (front matter, PDF / Office"
    " properties such as author; repeatable: all of them).")]
TagOpt = Annotated[list[str] | None, typer.Option(
    "--tag", help="Only documents with this tag (given with `ingest --tag`).")]
DateFromOpt = Annotated[str | None, typer.Option(
    "--date-from", help="Only documents dated on or after: YYYY, YYYY-MM or YYYY-MM-DD.")]
DateToOpt = Annotated[str | None, typer.Option(
    "--date-to", help="Only documents dated on or before: YYYY, YYYY-MM or YYYY-MM-DD.")]
AllowMassDeleteOpt = Annotated[bool, typer.Option(
    "--allow-mass-delete", metavar="",
    help="With --sync: remove documents even when the folder is gone or unreadable, or more"
         " than RAGLOOP_SYNC_MAX_REMOVE_SHARE (50%) and RAGLOOP_SYNC_MAX_REMOVE_COUNT (5) of its"
         " documents would go; without it such a sync removes nothing and says why.")]
DescriptionOpt = Annotated[str | None, typer.Option(
    "--description", metavar="TEXT",
    help="One line saying what the knowledge base holds (shown to the agent when several"
         " are served); default: drafted from the documents' titles.")]


def setting_hint(name: str) -> str:
    """" [env RAGLOOP_X, default D]" from the settings model (core/config.py)."""
    field = Settings.model_fields[name]
    shown = (field.json_schema_extra or {}).get("shown")  # type: ignore[union-attr]
    value = shown if shown is not None else field.default
    return env_hint(Settings.setting_name(name), None if value is None else str(value))


def setting_help(name: str) -> str:
    """An option's whole help from the settings model: the field's meaning (its Markdown
    quotes dropped) and its variable and default, as the README's table says them."""
    meaning = (Settings.model_fields[name].description or "").replace("`", "")
    return meaning + "." + setting_hint(name).replace("`", "")


EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder", metavar="SPEC", help=setting_help("embedder"))]
LanguageOpt = Annotated[str | None, typer.Option(
    "--language", metavar="CODE", help=setting_help("language"))]
ModelOpt = Annotated[str | None, typer.Option(metavar="PROVIDER:MODEL",
                                              help=setting_help("model"))]
GraderModelOpt = Annotated[str | None, typer.Option(metavar="PROVIDER:MODEL",
                                                    help=setting_help("grader_model"))]
BaseUrlOpt = Annotated[str | None, typer.Option(metavar="URL", help=setting_help("base_url"))]


# Options that set a setting or a run's choice take their help and choices from the model that
# checks them (core/config.py); a bad value is that model's error, the same as anywhere.
StrictOpt = Annotated[float | None, typer.Option(
    "--strict", help="0..1: " + option_help(Settings, "strictness").split(", see")[0] + "."
    + setting_hint("strictness"))]
DriverOpt = Annotated[str | None, typer.Option(help=option_help(RunOptions, "driver") + ".")]
RouteOpt = Annotated[str, typer.Option(help=option_help(RunOptions, "route") + ".")]
MaxStepsOpt = Annotated[int | None, typer.Option(
    help=f"Step ceiling, at least {MIN_STEPS}." + setting_hint("max_steps"))]


AsUserOpt = Annotated[str | None, typer.Option(
    "--as", metavar="USER", help="See only what USER may read (`ragloop users`); default:"
    " everything, as an admin.")]


def as_principal(base: KnowledgeBase | KnowledgeBases, user: str | None
                 ) -> KnowledgeBase | KnowledgeBases:
    """`base` as `user` sees it (kb/access.py); None: all of it."""
    return base.for_principal(principal_named(base, user))


def principal_named(base: KnowledgeBase | KnowledgeBases, user: str | None
                    ) -> Principal | None:
    """The stored user `user` (NotFoundError when there is none); None for no --as."""
    return None if user is None else base.backend.principals.principal_of(user)


def open_kb(kb: str | None, embedder: str | None = None, create: bool = False,
            language: str | None = None) -> KnowledgeBase:
    """Only ingest creates a knowledge base: elsewhere a mistyped --kb is an error."""
    from ragloop.kb import KnowledgeBase

    settings = settings_for(kb, embedder=embedder, language=language)
    return KnowledgeBase.open(settings.kb, settings, create=create)


@command()
def ingest(paths: Annotated[list[str], typer.Argument(
               help="Files or folders (recursive), or web page URLs (a sitemap URL: each page"
               " it lists).")],
           kb: KbOpt = None, embedder: EmbedderOpt = None, language: LanguageOpt = None,
           as_json: JsonOpt = False,
           tag: Annotated[list[str] | None, typer.Option(
               "--tag", help="Add this tag to every document ingested (repeatable); search"
               " with --tag to keep to them.")] = None,
           sync: Annotated[bool, typer.Option(
               "--sync", help="Make the KB match each FOLDER: add new files, update changed"
               " ones, remove the documents of files gone from it (never documents from"
               " other folders or uploads); each change is reported.")] = False,
           private_urls: Annotated[bool, typer.Option(
               "--private-urls", help="Allow URLs on loopback and private addresses (an"
               " intranet site); refused by default.")] = False,
           allow_mass_delete: AllowMassDeleteOpt = False,
           link_local_urls: Annotated[bool, typer.Option(
               "--link-local-urls", help="Allow URLs on link-local addresses (169.254.0.0/16,"
               " fe80::/10, cloud metadata services); refused by default, even with"
               " --private-urls.")] = False,
           description: DescriptionOpt = None,
           access: Annotated[list[str] | None, typer.Option(
               "--access", metavar="NAMES",
               help="Users or groups who may read what is ingested (repeatable, or"
               " comma-separated), where the file says nothing itself (front matter `access:`,"
               " a .ragloop-access file in its folder or above); default everyone.")] = None,
           ) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    from ragloop.ingest.pipeline import IngestInterrupted
    from ragloop.kb.catalog import describe

    empty = _empty_folders(paths, sync)  # before the KB is opened: a bad path creates nothing
    if sync and allow_mass_delete:  # confirmed: an emptied folder's documents go
        empty = []
    for folder in empty:
        err.print(f"[yellow]warning:[/] no files found under {shown(folder)}: nothing ingested"
                  f" from it{' (and nothing removed)' if sync else ''}", soft_wrap=True)
    paths = [p for p in paths if p not in empty]
    if not paths:  # nothing at all to read: a mistyped or unmounted folder, not a success
        raise typer.Exit(1)
    try:
        with open_kb(kb, embedder, create=True, language=language) as base:
            progress = not as_json and err.is_terminal
            if sync:
                report = None
                for folder in paths:
                    one = base.sync(folder, progress=progress, tags=tag or [],
                                    allow_mass_delete=allow_mass_delete, access=access)
                    report = one if report is None else _merged(report, one)
            else:
                report = base.ingest(paths, progress=progress, tags=tag or [],
                                     private_urls=private_urls,
                                     link_local_urls=link_local_urls, access=access)
            # the one line a catalog shows of this KB: the user's, else drafted from titles
            describe(base, description)
    except IngestInterrupted as exc:  # the knowledge base was closed (its indexes saved) first
        err.print(shown(exc.message()), soft_wrap=True)
        raise typer.Exit(130) from None
    assert report is not None
    if as_json:
        emit_json(report.to_dict())
    else:
        print_skipped(report.skipped())
        if report.removed is not None:
            for doc_id, change in report.changes:
                out.print(f"{change} {shown(doc_id)}")
        out.print(shown(report.summary()))
    if report.held:  # a sync that stopped short of removing: a script must notice
        if not as_json:
            err.print(f"[yellow]sync held[/] {shown(report.held)}", soft_wrap=True)
        raise typer.Exit(1)
    if report.failed and not (report.added or report.updated or report.unchanged):
        raise typer.Exit(1)


def _empty_folders(paths: list[str], sync: bool) -> list[str]:
    """The local folders among `paths` with no file to read in them (hidden files do not
    count: ingest passes over them). A local path that does not exist, or a --sync path that
    is not a folder, is an error raised here, before any knowledge base is opened or
    created. URLs are left to the ingest."""
    from ragloop.ingest.pipeline import iter_files
    from ragloop.ingest.readers.web import is_url

    empty = []
    for raw in paths:
        if is_url(raw):
            continue
        path = Path(raw)
        if not path.exists():
            raise UserError(f"{raw}: no such file or folder (nothing was ingested)")
        if sync and not path.is_dir():
            raise UserError(f"{raw}: --sync needs a folder (it removes the documents of files"
                            " gone from it)")
        if path.is_dir() and next(iter_files([path]), None) is None:
            empty.append(raw)
    return empty


def _merged(a: IngestReport, b: IngestReport) -> IngestReport:
    """The reports of two folders' syncs as one."""
    for name in ("added", "updated", "unchanged", "chunks", "embedded", "seconds"):
        setattr(a, name, getattr(a, name) + getattr(b, name))
    a.unsupported += b.unsupported
    a.failed += b.failed
    a.conflicts += b.conflicts
    a.changes += b.changes
    a.removed = (a.removed or []) + (b.removed or [])
    a.held = "; ".join(h for h in (a.held, b.held) if h) or None
    a.held_back += b.held_back
    return a


# Skipped files named one per line up to here; past it, a count (`--json` lists them all).
SKIPPED_SHOWN = 20


def print_skipped(skipped: list[tuple[str, str]]) -> None:
    for path, reason in skipped[:SKIPPED_SHOWN]:
        err.print(f"[yellow]skipped[/] {shown(path)}: {shown(reason)}", soft_wrap=True)
    if len(skipped) > SKIPPED_SHOWN:
        err.print(f"[yellow]and {len(skipped) - SKIPPED_SHOWN} more skipped[/]"
                  " (`ragloop ingest --json` lists every one with its reason)", soft_wrap=True)


@command(name="describe")
def describe_(description: Annotated[str | None, typer.Argument(
                  help="One line saying what the knowledge base holds; leave it out to show"
                       " the current one.")] = None,
              kb: KbOpt = None, draft: Annotated[bool, typer.Option(
                  "--draft", metavar="", help="Draft it again from the documents' titles.")]
              = False) -> None:
    """Set or show the knowledge base's one-line description (what a catalog of several
    knowledge bases tells the agent about it)."""
    from ragloop.kb.catalog import describe, draft_description

    with open_kb(kb) as base:
        if draft:
            description = draft_description(base)
        line = describe(base, description, by_user=not draft)
    out.print(shown(line))


InKbOpt = Annotated[str | None, typer.Option(
    "--in", metavar="NAME",
    help="Several knowledge bases: the one the document is in, as a citation names it"
         " (needed when the doc id is in several).")]


@contextmanager
def one_holding(doc_id: str) -> Iterator[None]:
    """A doc id in several knowledge bases read or deleted without `--in`: an error naming
    the `--in` to give."""
    from ragloop.kb.multi import AmbiguousDocument

    try:
        yield
    except AmbiguousDocument as exc:
        raise UserError(f"{doc_id!r} is in several knowledge bases: say which with "
                        + " or ".join(f"--in {n}" for n in exc.holding)) from None


def removed(base: KnowledgeBase | KnowledgeBases, doc_id: str, in_kb: str | None) -> bool:
    """Delete `doc_id` from the KB holding it (`in_kb` when given); False when none does.
    One KB served alone has no name: naming one is refused, as the user meant another."""
    from ragloop.core.errors import NotFoundError
    from ragloop.kb.multi import AmbiguousDocument, KnowledgeBases, write_target

    if not isinstance(base, KnowledgeBases):
        return write_target(base, in_kb, "--in NAME with --kb NAME=LOCATION").remove(doc_id)
    with one_holding(doc_id):
        try:
            name = base.holder(doc_id, in_kb)
        except AmbiguousDocument:
            raise
        except NotFoundError:  # in none of them
            return False
    return base.kbs[name].remove(doc_id)


@command()
def rm(doc_id: str, kb: KbsOpt = None, catalog: CatalogOpt = None, in_kb: InKbOpt = None
       ) -> None:
    """Delete a document and its chunks; several knowledge bases: from the one holding it."""
    served = Served(kb, catalog)
    with served.open(settings_for(served.location)) as base:
        if not removed(base, doc_id, in_kb):
            kbs = f" in {in_kb}" if in_kb else ""
            raise UserError(f"No document {doc_id!r}{kbs}; `ragloop docs` lists the doc_ids.")
    out.print(f"removed {shown(doc_id)}")


@command()
def search(query: str, k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 8,
           mode: Annotated[str, typer.Option(help="hybrid | bm25 | vector")] = "hybrid",
           kb: KbsOpt = None, catalog: CatalogOpt = None, embedder: EmbedderOpt = None,
           as_json: JsonOpt = False,
           source: SourceOpt = None, doc_prefix: DocPrefixOpt = None, where: WhereOpt = None,
           tag: TagOpt = None, date_from: DateFromOpt = None,
           date_to: DateToOpt = None, as_user: AsUserOpt = None) -> None:
    """Hybrid search (BM25 + vectors, fused by reciprocal rank fusion), optionally within the
    documents a filter selects; several knowledge bases: all of them, merged by rank."""
    from ragloop.retrieval.filters import make_filter
    from ragloop.retrieval.fusion import MODES

    if mode not in MODES:
        raise UserError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    flt = make_filter(source=source or [], doc_id_prefix=doc_prefix or [],
                      metadata=where or [], tag=tag or [], date_from=date_from,
                      date_to=date_to)
    served = Served(kb, catalog)
    settings = settings_for(served.location, embedder=embedder)
    with served.open(settings) as base:
        hits = as_principal(base, as_user).search(query, k, mode, filter=flt)  # type: ignore[arg-type]
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    if not hits:
        out.print("no hits")
    for i, h in enumerate(hits, start=1):
        ranks = (f"bm25 #{h.bm25_rank if h.bm25_rank else '-'}"
                 f"  vector #{h.vector_rank if h.vector_rank else '-'}")
        where_ = f" [dim]({shown(h.kb)})[/]" if h.kb else ""
        out.print(f"[bold]{i}. {shown(h.doc_id)} §{shown(h.section)}[/]{where_}"
                  f" {shown(h.section_title)}  [dim]score {h.score:.4f}  {ranks}[/]")
        snippet = " ".join(h.text.split())
        out.print(f"   {shown(snippet[:240])}{'…' if len(snippet) > 240 else ''}")


@command()
def docs(kb: KbsOpt = None, catalog: CatalogOpt = None, as_json: JsonOpt = False,
         as_user: AsUserOpt = None) -> None:
    """List documents with their section and chunk counts; several knowledge bases: each
    one's, with its name."""
    served = Served(kb, catalog)
    with served.open(settings_for(served.location)) as base:
        documents = as_principal(base, as_user).documents()
    if as_json:
        emit_json([d.to_dict() for d in documents])
        return
    several = served.entries is not None
    kbs = f" in {len(served.entries)} knowledge bases" if served.entries else ""
    summary = f"{len(documents)} documents, {sum(d.chunks for d in documents)} chunks{kbs}"
    if not out.is_terminal:
        # piped: one TSV line per document under a header, the summary on stderr, so `cut`,
        # `sort` or a spreadsheet read the columns; fields escaped (terminal.tsv_field) so a
        # tab or newline in a file name cannot split a row or fake one
        header = ["kb"] * several + ["doc_id", "title", "source", "sections", "chunks"]
        lines = ["\t".join(header)]
        lines += ["\t".join([tsv_field(d.kb)] * several
                            + [tsv_field(v) for v in (d.doc_id, d.title, d.source)]
                            + [str(d.sections), str(d.chunks)]) for d in documents]
        sys.stdout.write("".join(line + "\n" for line in lines))
        err.print(summary)
        return
    # the doc_id is what `section` and `rm` take: never cut; on a narrow terminal the source
    # column goes (it is in --json) and the title wraps; a newline or tab in a value prints as
    # `\n` / `\t` (terminal.one_line), never as a row of its own
    id_width = max((len(one_line(d.doc_id)) for d in documents), default=6)
    with_source = out.width >= id_width + 80
    table = Table(box=None)
    if several:  # the name `section --in` and a citation's "(NAME)" give
        table.add_column("kb", no_wrap=True)
    table.add_column("doc_id", no_wrap=True, min_width=id_width)
    table.add_column("title", overflow="fold", min_width=12)
    if with_source:
        table.add_column("source", overflow="fold")
    for name in ("sections", "chunks"):
        table.add_column(name, justify="right", no_wrap=True)
    # who may read each document (ingest/access.py), when any document says
    ruled = any(ACCESS_KEY in d.metadata for d in documents)
    if ruled:
        table.add_column("access", overflow="fold")
    for d in documents:
        source = [Text(one_line(d.source))] if with_source else []
        where = [Text(one_line(d.kb))] if several else []
        readers = [Text(one_line(", ".join(d.metadata.get(ACCESS_KEY, ["everyone"]))
                                 or "admins only"))] if ruled else []
        table.add_row(*where, Text(one_line(d.doc_id)), Text(one_line(d.title)), *source,
                      str(d.sections), str(d.chunks), *readers)
    out.print(table)
    out.print(summary)


@command()
def section(doc_id: str, section_id: Annotated[str, typer.Argument(metavar="SECTION")],
            kb: KbsOpt = None, catalog: CatalogOpt = None, in_kb: InKbOpt = None,
            as_json: JsonOpt = False) -> None:
    """Print the whole text of one section."""
    served = Served(kb, catalog)
    with served.open(settings_for(served.location)) as base, one_holding(doc_id):
        found = base.section(doc_id, section_id, in_kb)
    if as_json:
        emit_json(found.to_dict())
        return
    where = f" [dim]({shown(found.kb)})[/]" if found.kb else ""
    out.print(f"[bold]{shown(found.doc_id)} §{shown(found.section)}[/]{where} "
              f"{shown(' > '.join(found.title_path))}\n")
    out.print(shown(found.text))


def print_event(event: Event, debug: bool) -> None:
    from ragloop.agent.run import log_line
    from ragloop.core.events import (
        CondenseEvent,
        ErrorEvent,
        GradeEvent,
        PlacementEvent,
        PlanEvent,
        RewriteEvent,
        RouteEvent,
    )

    line = log_line(event)
    if line:  # one physical line per tool call whatever the width, so `grep step=` works
        err.print(visible(line), markup=False, highlight=False, emoji=False, soft_wrap=True)
        return
    if isinstance(event, CondenseEvent):  # what is searched, when it is not what was typed
        if event.standalone != event.typed or debug:
            queries = " + ".join(shown(q) for q in event.queries or [event.standalone])
            err.print(f"[cyan]searching:[/] {queries}"
                      f"{f'  [dim]({shown(event.reason)})[/]' if debug else ''}")
        return
    if not debug:
        return
    if isinstance(event, RouteEvent):
        err.print(f"[cyan]route[/] {shown(event.route)}: {shown(event.reason)}")
    elif isinstance(event, PlanEvent):
        err.print(f"[cyan]plan[/] need_search={event.need_search} "
                  f"sub_questions={shown(json.dumps(event.sub_questions, ensure_ascii=False))}"
                  f" {shown(event.reason or '')}")
    elif isinstance(event, GradeEvent):
        verdicts = ", ".join(f"{v['doc_id']} §{v['section']}={v['verdict']}"
                             f"({(v.get('score') or 0):.2f})" for v in event.verdicts or [])
        err.print(f"[cyan]grade[/] kept {event.kept}/{event.chunks} enough={event.enough}"
                  f" missing={shown(repr(event.missing or ''))}"
                  f" next_query={shown(repr(event.next_query))}")
        if verdicts:
            err.print(f"  [dim]{shown(verdicts)}[/]")
    elif isinstance(event, RewriteEvent):
        err.print(f"[cyan]rewrite[/] from gap {shown(repr(event.missing))} → "
                  f"{shown(repr(event.query))}")
    elif isinstance(event, PlacementEvent):  # why each document holds its place
        err.print("[cyan]placement[/]")
        for p in event.places:
            reason = p.get("reason") or ", ".join(p.get("why") or [])
            err.print(f"  {p.get('place')}. {shown(p.get('doc_id'))} [dim]{shown(reason)}[/]")
    elif isinstance(event, ErrorEvent):
        err.print(f"[red]error[/] {shown(event.error)}")


def print_options(clarification: dict[str, Any] | None) -> None:
    """A run that asked back (status needs_input): its options, numbered; the user's choice
    is the next question of the conversation."""
    if not clarification:
        return
    for line in numbered(clarification["options"]):
        out.print(f"  {shown(line)}")
    out.print("[dim]Ask again naming one of them, or continue the conversation with it.[/]\n")


def answer_printing(debug: bool, as_json: bool = False
                    ) -> tuple[AnswerPrinter | None, Callable[[Event], None]]:
    """On a terminal (and not --json), the printer of each answer as it is written; and the
    listener of a run's events: the answer's pieces to the printer, the rest as steps."""
    from ragloop.apps.answer_printer import AnswerPrinter

    printer = AnswerPrinter(out) if not as_json and out.is_terminal else None

    def on_event(event: Event) -> None:
        if printer is None or not printer.hear(event):
            print_event(event, debug)

    return printer, on_event


def print_run(result: dict[str, Any], streamed: str | None = None) -> None:
    """The run's answer and sources; `streamed`: the answer as it was printed while written
    (apps/answer_printer.py), shown again only as the checks changed it."""
    if not streamed:  # nothing printed while written (no terminal, or a run that failed)
        out.print(f"\n[bold]{shown(result['answer'])}[/]\n")
    elif streamed != result["answer"]:
        out.print(f"\n[dim]checked:[/] [bold]{shown(result['answer'])}[/]\n")
    else:
        out.print()
    print_options(result.get("clarification"))
    for c in result["citations"]:
        where = f" ({shown(c['kb'])})" if c.get("kb") else ""
        out.print(f"[{c['n']}] → {shown(c['doc_id'])} §{shown(c['section'])}{where}")
    if result.get("closest"):
        out.print("\nClosest passages (not confirmed):")
        for c in result["closest"]:
            out.print(f"- {shown(c['doc_id'])} §{shown(c['section'])}: {shown(c['text'])}")
    if result.get("invalid_citations"):
        out.print(f"[yellow]removed invalid citations:"
                  f" {shown(str(result['invalid_citations']))}[/]")
    for u in result.get("unsupported") or []:
        out.print(f"[yellow]removed unsupported citation [{u['n']}]: its passage does not"
                  f" support \"{shown(u['sentence'])}\"[/]")
    if result.get("citations_unchecked"):
        out.print("[yellow]citations not checked: the model's verdict was unreadable[/]")
    usage = result["usage"]
    out.print(f"\n[dim]status={result['status']} route={shown(str(result['route']))} "
              f"({shown(result.get('route_reason') or '')}) steps={result['steps']}"
              f"/{result['max_steps']} latency={result['latency_s']:.2f}s "
              f"{usage_summary(usage)} run={shown(result['run_id'])}[/]")
    if result.get("conversation_id"):
        out.print(f"[dim]conversation={shown(result['conversation_id'])} (continue with"
                  f" --conversation {shown(result['conversation_id'])})[/]")


@command()
def chat(model: ModelOpt = None,
         grader_model: GraderModelOpt = None,
         driver: DriverOpt = None,
         max_steps: MaxStepsOpt = None,
         base_url: BaseUrlOpt = None,
         kb: KbOpt = None,
         debug: Annotated[bool, typer.Option(
             "--debug", metavar="", help="Show plan, verdicts, rewrites.")] = False,
         strict: StrictOpt = None,
         conversation: Annotated[str | None, typer.Option(
             "--conversation", metavar="ID", help="Continue conversation ID.")] = None,
         as_user: AsUserOpt = None,
         ) -> None:
    """Talk with the knowledge base: each line is the next turn of one conversation
    (follow-ups are made standalone from the earlier turns). /new starts over; Ctrl-D leaves."""
    from ragloop.agent.conversations import EngineConversation
    from ragloop.agent.engine import Engine
    from ragloop.apps.chat import chat_loop
    from ragloop.kb import KnowledgeBase

    printer, on_event = answer_printing(debug)
    settings = settings_for(kb, model=model, grader_model=grader_model, base_url=base_url,
                            strictness=strict)
    with KnowledgeBase.open(settings.kb, settings, create=False) as base:
        # --as: USER's documents, and USER's conversations (storage/owned.py)
        engine = Engine(base, settings, base.backend.runs, source="cli",
                        principal=principal_named(base, as_user))
        resumed = [engine.conversation(conversation)] if conversation else []

        def start() -> EngineConversation:  # the one to continue first, then new ones
            return resumed.pop() if resumed else engine.conversation()

        def read(prompt: str) -> str:
            if printer is not None:
                printer.done()  # a turn stopped by Ctrl-C leaves no text behind for the next
            return input(prompt)

        code = chat_loop(start, read, lambda text: err.print(shown(text)),
                         on_event, lambda r: print_run(
                             r.to_dict(), printer.done() if printer is not None else None),
                         driver=driver, max_steps=max_steps)
    raise typer.Exit(code)


ConversationOpt = Annotated[str | None, typer.Option(
    "--conversation", metavar="ID|new",
    help="Ask as the next turn of conversation ID (its earlier turns are the history;"
         " the id is printed after the answer); `new` starts one.")]


@command()
def ask(question: str,
        model: ModelOpt = None,
        grader_model: GraderModelOpt = None,
        driver: DriverOpt = None,
        max_steps: MaxStepsOpt = None,
        route: RouteOpt = "auto",
        base_url: BaseUrlOpt = None,
        kb: KbsOpt = None, as_json: JsonOpt = False,
        debug: Annotated[bool, typer.Option(
            "--debug", metavar="", help="Show plan, verdicts, rewrites.")] = False,
        strict: StrictOpt = None, catalog: CatalogOpt = None,
        conversation: ConversationOpt = None,
        as_user: AsUserOpt = None,
        ) -> None:
    """Answer a question with cited evidence (agent loop with a step ceiling); on a terminal
    the answer prints as it is written."""
    from ragloop.agent.engine import Engine

    printer, on_event = answer_printing(debug, as_json)
    served = Served(kb, catalog)
    settings = settings_for(served.location, model=model, grader_model=grader_model,
                            base_url=base_url, strictness=strict)
    with served.open(settings) as base:
        engine = Engine(base, settings, base.backend.runs, source="cli",
                        principal=principal_named(base, as_user))
        ask_ = engine.ask
        if conversation is not None:
            ask_ = engine.conversation(None if conversation == "new" else conversation).ask
        result = ask_(question, route=route, driver=driver, max_steps=max_steps,
                      on_event=None if as_json else on_event)
    data = result.to_dict()
    if as_json:
        emit_json(data)
    else:
        print_run(data, printer.done() if printer is not None else None)
    if result.status == "failed":
        raise typer.Exit(1)


@command()
def runs(run_id: Annotated[str | None, typer.Argument(help="Show one run in full.")] = None,
         limit: Annotated[int, typer.Option(help="How many recent runs.")] = 20,
         source: Annotated[str | None, typer.Option(
             help="Only runs started by cli, api, eval or mcp; default: every run.")] = None,
         kb: KbOpt = None, as_json: JsonOpt = False, as_user: AsUserOpt = None) -> None:
    """List recent runs, or show one with its events; `--as USER`: only USER's runs (what
    USER's key lists over HTTP; another user's run is not there)."""
    from ragloop.storage.owned import runs_for

    backend = open_backend(kb)
    try:
        principal = None if as_user is None else backend.principals.principal_of(as_user)
        store = runs_for(backend.runs, principal)
        if run_id is None:
            rows = store.list(limit, source)
            if as_json:
                emit_json(rows)
                return
            table = Table("run", "source", "status", "route", "steps", "latency", "question",
                          box=None)
            for r in rows:
                table.add_row(Text(visible(r["run_id"])), Text(visible(r["source"])),
                              Text(visible(r["status"])), Text(visible(r["route"] or "")),
                              str(r["steps"]), f"{(r['latency_s'] or 0):.2f}s",
                              Text(visible(r["question"][:70])))
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
    out.print(f"[bold]{shown(run['question'])}[/]  [dim]{shown(run['run_id'])}"
              f" {shown(run['status'])}[/]")
    for e in events:
        out.print(f"  step={e['step']} {shown(e['kind'])} "
                  f"{shown(json.dumps(e['data'], ensure_ascii=False)[:300])}")
    out.print(f"\n{shown(run['answer'] or '')}")


@command()
def stats(kb: KbOpt = None, as_json: JsonOpt = False,
          source: Annotated[str, typer.Option(
              help="cli, api, eval or mcp; default: every run except eval's; all: every run.")]
          = "default") -> None:
    """Dashboard figures: mean steps, % of runs that used every step, % forced to answer, % of
    chunks discarded, latency."""
    backend = open_backend(kb)
    try:
        m = backend.runs.metrics(source)
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
    out.print(f"by status                  {shown(str(m.by_status))}")
    if m.warn_truncated:
        err.print(f"[yellow]warning:[/] {m.truncated_pct:.0f}% of runs were forced to answer at"
                  " MAX_STEPS (above 10%): raise --max-steps or look at what the searches miss"
                  " (`ragloop runs`).")
    elif m.warn_used_all_steps:
        err.print(f"[yellow]warning:[/] {m.used_all_steps_pct:.0f}% of runs used every step"
                  " (above 10%): look at what the spare steps searched for (`ragloop runs`).")


def _eval_corpus(base: KnowledgeBase | KnowledgeBases, data: Dataset, *, progress: bool,
                 quiet: bool) -> list[tuple[str, str]]:
    """Ingest the dataset's corpus when it has one (into one knowledge base; several served
    must hold it already), then resolve its gold names against the KBs' documents: the
    (question, name) pairs that did not resolve, each warned about."""
    from ragloop.eval.datasets import ingest_corpus, resolve_gold
    from ragloop.kb import KnowledgeBase

    if data.corpus is not None and isinstance(base, KnowledgeBase):
        added = ingest_corpus(base, data.corpus, progress=progress)
        if added and not quiet:
            err.print(f"ingested {added} corpus documents into {shown(str(base.settings.kb))}")
    doc_ids = [d.doc_id for d in base.documents()]
    if not doc_ids:
        raise UserError(f"The knowledge base {base.settings.kb} is empty: ingest the documents"
                        f" first (`ragloop ingest PATH --kb {base.settings.kb}`).")
    misses = resolve_gold(data, doc_ids)
    for qid, name in misses[:10]:
        err.print(f"[yellow]warning:[/] question {shown(qid)}: gold document"
                  f" {shown(repr(name))} is not among the knowledge base's documents")
    if len(misses) > 10:
        err.print(f"[yellow]warning:[/] {len(misses)} gold names did not resolve in all")
    return misses


@command(name="eval")
def eval_(dataset: Annotated[Path, typer.Argument(
              help="Seed-style .jsonl ({q, gold_doc, type, answer?}) or a BEIR folder.")],
          kb: KbsOpt = None,
          catalog: CatalogOpt = None,
          paths: Annotated[str, typer.Option(
              help="Comma-separated: single (one search), agent (the loop), router (auto).")]
          = "single,agent,router",
          k: Annotated[int, typer.Option("-k", help="Documents counted for recall@k / MRR.")] = 10,
          model: ModelOpt = None,
          grader_model: GraderModelOpt = None,
          driver: DriverOpt = None,
          max_steps: MaxStepsOpt = None,
          base_url: BaseUrlOpt = None,
          limit: Annotated[int | None, typer.Option(help="Only the first N questions.")] = None,
          out_dir: Annotated[Path | None, typer.Option(
              "--out", help="Results folder \\[default ./eval-results/<dataset>].")] = None,
          workers: Annotated[int | None, typer.Option(
              help="Parallel runs \\[default 1 offline, 4 with a remote model].")] = None,
          fresh: Annotated[bool, typer.Option(
              "--fresh", metavar="", help="Discard earlier results in --out.")]
          = False,
          embedder: EmbedderOpt = None, as_json: JsonOpt = False,
          strict: StrictOpt = None) -> None:
    """Evaluate single-shot vs agent vs router: recall@k, MRR, answers, cost, latency.

    Resumable: results go to OUT/results.jsonl as they finish; a rerun skips finished pairs.
    Writes OUT/report.json, OUT/report.md and OUT/report.html (plots)."""
    from ragloop.agent.engine import Engine
    from ragloop.core.extras import EVAL_MODULES, missing_modules
    from ragloop.eval.conversations import evaluate as evaluate_conversations
    from ragloop.eval.conversations import is_conversation_set
    from ragloop.eval.datasets import load_dataset
    from ragloop.eval.metrics import build_report, diagnose
    from ragloop.eval.report import markdown, to_json, write_reports
    from ragloop.eval.runner import EvalOptions, parse_paths, run_eval

    chosen = parse_paths(paths)
    if k < 1:
        raise UserError("-k must be at least 1")
    served = Served(kb, catalog)
    if is_conversation_set(dataset):  # {"turns": [...]} per line: eval/conversations.py
        settings = settings_for(served.location, model=model, grader_model=grader_model,
                                base_url=base_url, embedder=embedder, strictness=strict)
        with served.open(settings) as base:
            text, misses = evaluate_conversations(
                base, Engine(base, settings.with_(max_steps=max_steps), source="eval"),
                dataset, chosen, out_dir or Path("eval-results") / dataset.stem, limit)
        out.print(shown(text), highlight=False)
        for name in misses:
            err.print(f"[yellow]warning:[/] gold document {shown(repr(name))} is not in the"
                      " knowledge base")
        return
    data = load_dataset(dataset)
    settings = settings_for(served.location, model=model, grader_model=grader_model,
                            base_url=base_url, embedder=embedder, strictness=strict)
    progress = not as_json and err.is_terminal
    with served.open(settings, create=served.entries is None) as base:
        misses = _eval_corpus(base, data, progress=progress, quiet=as_json)
        offline = settings.model.strip().lower() in ("offline", "none", "")
        options = EvalOptions(out=out_dir or Path("eval-results") / data.name, paths=chosen,
                              k=k, limit=limit, driver=driver, max_steps=max_steps,
                              workers=workers or (1 if offline else 4), progress=progress,
                              fresh=fresh, judge=not offline)
        try:
            # single-shot reads the top k of its search: the same k its recall is counted at
            at_k = settings.with_(single_k=k)
            records = run_eval(data, lambda: Engine(base, at_k, source="eval"), options)
        except KeyboardInterrupt:
            err.print(f"\n[yellow]interrupted:[/] finished results are in"
                      f" {shown(str(options.out / 'results.jsonl'))}; run the same command"
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
    out.print(shown(markdown(report)))
    for note in notes:
        out.print(f"\n[bold]{shown(note)}[/]")
    # without the `eval` extra report.html has the tables only (eval/report.py says so in it)
    tables_only = (" (tables only: pip install 'ragloop\\[eval]' adds the plots)"
                   if missing_modules(EVAL_MODULES) else "")
    out.print(f"\n[dim]{len(records)} results in {shown(str(options.out / 'results.jsonl'))};"
              f" report: {shown(str(files['html']))}{tables_only}[/]")


@command()
def serve(host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="Port.")] = 8000,
          model: ModelOpt = None,
          grader_model: GraderModelOpt = None,
          base_url: BaseUrlOpt = None,
          kb: KbsOpt = None,
          catalog: CatalogOpt = None,
          workers: Annotated[int, typer.Option(
              help="Runs executed at once by this server.")] = 2,
          no_local_workers: Annotated[bool, typer.Option(
              "--no-local-workers", metavar="",
              help="Postgres only: only enqueue runs; `ragloop worker` processes run them.")]
          = False,
          sync: Annotated[list[str] | None, typer.Option(
              "--sync", metavar="FOLDER|NAME=FOLDER",
              help="A folder to keep the KB in sync with (as `ingest --sync`), at start and"
              " every --sync-every seconds (repeatable); several KBs: NAME=FOLDER, NAME"
              " the KB's.")] = None,
          sync_every: Annotated[float, typer.Option(
              help="Seconds between two syncs of the --sync folders.")] = 300.0,
          allow_mass_delete: AllowMassDeleteOpt = False) -> None:
    """HTTP API + live run page + dashboard. Beyond loopback, RAGLOOP_API_KEY is required.

    With a postgresql:// --kb, POST /runs enqueues the run in the database and any server's
    or worker's queue loop takes it; this server runs --workers such loops itself unless
    --no-local-workers."""
    from ragloop.apps.server.app import serve as run_server

    served = Served(kb, catalog)
    settings = settings_for(served.location, model=model, grader_model=grader_model,
                            base_url=base_url)
    if sync_every <= 0:
        raise UserError(f"--sync-every must be a positive number of seconds, not {sync_every}")
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    run_server(settings, host=host, port=port, api_key=api_key,
               workers=workers, local_workers=0 if no_local_workers else None,
               sync_folders=sync or None, sync_every=sync_every, catalog=served.entries,
               allow_mass_delete=allow_mass_delete)


@command()
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


@command(name="check-model")
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
        out.print(Text(visible(step.detail)))
    if all(s.ok for s in steps) and len(steps) == 2:
        out.print(f"{shown(chat.name)} works with ragloop's tools loop.")
        return
    raise typer.Exit(1)


@command(name="migrate")
def migrate_(src: Annotated[str, typer.Argument(help="Source: a folder or postgresql:// URL.")],
             dst: Annotated[str, typer.Argument(help="Destination: a folder or URL.")],
             as_json: JsonOpt = False) -> None:
    """Copy a knowledge base between SQLite and Postgres (either way): vectors and runs too."""
    from ragloop.storage.migrate import migrate

    report = migrate(src, dst)
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(shown(report.summary()))


@command()
def mcp(model: Annotated[str | None, typer.Option(
            metavar="PROVIDER:MODEL",
            help="Model for the ask tool: offline | anthropic:<model> | openai:<model> |"
            " ollama:<model> | llamacpp:<model>." + env_hint("RAGLOOP_MODEL"))] = None,
        kb: KbsOpt = None, catalog: CatalogOpt = None,
        as_user: Annotated[str | None, typer.Option(
            "--as", metavar="USER", help="Every tool as USER (`ragloop users`): only what USER"
            " may read, only USER's conversations. Or RAGLOOP_MCP_KEY=<USER's key>; default:"
            " everything, as an admin.")] = None) -> None:
    """The knowledge base's tools as an MCP server over stdio (Claude Desktop / Code)."""
    from ragloop.apps.mcp_server import run as run_mcp

    served = Served(kb, catalog)
    run_mcp(settings_for(served.location, model=model), served.entries, as_user)


@command(name="settings")
def settings_(markdown: Annotated[bool, typer.Option(
                  "--markdown", metavar="", help="The README's table of every setting.")]
              = False,
              into: Annotated[Path | None, typer.Option(
                  "--into", metavar="FILE", help="With --markdown: replace the table between"
                  " its two markers in FILE (the README's).")] = None,
              kb: KbOpt = None) -> None:
    """Every setting: its variable (also a ragloop.toml key), default, what it accepts and
    what it means; without --markdown, the values in force here."""
    from ragloop.core.config import TABLE_END, TABLE_START, settings_table

    if markdown and into is not None:
        text = into.read_text(encoding="utf-8")
        if TABLE_START not in text or TABLE_END not in text:
            raise UserError(f"{into}: no settings table markers ({TABLE_START} … {TABLE_END})")
        head, rest = text.split(TABLE_START, 1)
        into.write_text(head + TABLE_START + "\n" + settings_table() + TABLE_END
                        + rest.split(TABLE_END, 1)[1], encoding="utf-8")
        return
    if markdown:
        sys.stdout.write(settings_table())
        return
    # the decision registry, so a decision setting naming no implementation is refused here too
    # (other commands load it only when they run a decision: core/config.py DECISION_NAMES)
    import ragloop.agent.decisions  # noqa: F401

    current = settings_for(kb)
    for name in Settings.model_fields:
        value = getattr(current, name)
        shown_value = "***" if isinstance(value, SecretStr) else value
        out.print(f"{Settings.setting_name(name)}={'' if value is None else shown_value}")


def _add_access_commands() -> None:
    """`ragloop users …` and `ragloop keys …` (apps/access_cli.py, which reads this module's
    options: imported once they are all defined)."""
    from ragloop.apps.access_cli import access_app, keys_app, users_app

    app.add_typer(users_app, name="users")
    app.add_typer(keys_app, name="keys")
    app.add_typer(access_app, name="access")


_add_access_commands()


def main() -> None:
    try:
        app()
    except UserError as exc:  # one line (not wrapped at 80 columns): scripts grep it
        err.print(f"[red]error:[/] {shown(str(exc))}", soft_wrap=True)
        sys.exit(2)
    except RagloopError as exc:
        err.print(f"[red]failed:[/] {shown(str(exc))}")
        sys.exit(1)


if __name__ == "__main__":
    main()
