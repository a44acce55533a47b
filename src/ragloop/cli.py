"""The `ragloop` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragloop.config import Settings
from ragloop.errors import RagloopError, UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ragloop: agentic RAG over a local knowledge base.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)

KbOpt = Annotated[Path | None, typer.Option(
    "--kb", help="Knowledge base folder [env RAGLOOP_KB, default ./kb].")]
EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder",
    help="local:all-MiniLM-L6-v2 (default) or openai:<model> [env RAGLOOP_EMBEDDER].")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def settings_for(kb: Path | None, **changes: object) -> Settings:
    return Settings.from_env().with_(kb=str(kb) if kb else None, **changes)


def open_kb(kb: Path | None, embedder: str | None = None):
    from ragloop.kb import KnowledgeBase

    settings = settings_for(kb, embedder=embedder)
    return KnowledgeBase.open(settings.kb, settings)


def emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


@app.command()
def ingest(paths: Annotated[list[Path], typer.Argument(help="Files or folders (recursive).")],
           kb: KbOpt = None, embedder: EmbedderOpt = None, as_json: JsonOpt = False) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    with open_kb(kb, embedder) as base:
        report = base.ingest(paths, progress=not as_json and err.is_terminal)
    if as_json:
        emit_json(report.to_dict())
    else:
        for path, reason in report.failed:
            err.print(f"[yellow]skipped[/] {escape(path)}: {escape(reason)}")
        out.print(report.summary())
    if report.failed and not (report.added or report.updated or report.unchanged):
        raise typer.Exit(1)


@app.command()
def rm(doc_id: str, kb: KbOpt = None) -> None:
    """Delete a document and its chunks."""
    with open_kb(kb) as base:
        if not base.remove(doc_id):
            raise UserError(f"No document {doc_id!r}; `ragloop docs` lists the doc_ids.")
    out.print(f"removed {doc_id}")


@app.command()
def search(query: str, k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 8,
           mode: Annotated[str, typer.Option(help="hybrid | bm25 | vector")] = "hybrid",
           kb: KbOpt = None, embedder: EmbedderOpt = None, as_json: JsonOpt = False) -> None:
    """Hybrid search (BM25 + vectors, fused by reciprocal rank fusion)."""
    from ragloop.search import MODES

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
        table.add_row(d.doc_id, d.title, d.source, str(d.sections), str(d.chunks))
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
