"""The Python API: a knowledge base in one folder, mirroring the CLI."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ragloop.core.access import Principal, parse_names
from ragloop.core.config import LOCAL_EMBEDDER, MULTILINGUAL_EMBEDDER, Settings
from ragloop.core.errors import (
    EmbedderMismatchError,
    LanguageMismatchError,
    NotFoundError,
    UserError,
)
from ragloop.core.types import DocumentInfo, Hit, ParsedDocument, SectionInfo
from ragloop.core.unicode import clean_text
from ragloop.embed.base import Embedder
from ragloop.embed.cache import CachedEmbedder
from ragloop.kb.search import hybrid_search
from ragloop.retrieval.filters import Filter
from ragloop.retrieval.fusion import Mode
from ragloop.retrieval.languages import ENGLISH, detect_language, get_language
from ragloop.storage.backend import open_backend
from ragloop.storage.protocols import Backend, Store

if TYPE_CHECKING:
    # imported where used: the readers (markdown-it, pypdf, …) cost a cold search 0.3 s
    from ragloop.ingest.pipeline import Admit, IngestReport


_VIEWS_LOCK = threading.Lock()


def _same_embedder(a: str, b: str) -> bool:
    aliases = {"local", "local:default", LOCAL_EMBEDDER}
    return a == b or (a in aliases and b in aliases)


class KnowledgeBase:
    """Documents → sections → chunks, searchable by BM25, vectors or both."""

    def __init__(self, backend: Backend, settings: Settings, embedder: Embedder | None = None,
                 language: str | None = None):
        #: the storage: its store, and the run store and queue an engine borrows
        self.backend = backend
        self.store = store = backend.store
        self.settings = settings
        self.language = _kb_language(store, language or settings.language)
        recorded = store.get_meta("embedder")
        self._asked = (embedder.name if embedder else settings.embedder) or None
        if recorded and self._asked and not _same_embedder(recorded, self._asked):
            raise EmbedderMismatchError(
                f"This knowledge base was built with the embedder {recorded!r}, not"
                f" {self._asked!r}: its vectors would not be comparable. Open it with"
                f" --embedder {recorded} (or RAGLOOP_EMBEDDER), or ingest into a new --kb folder.")
        self._recorded = recorded
        self._inner = embedder
        self._embedder: CachedEmbedder | None = None

    @property
    def embedder_name(self) -> str:
        """Recorded, else asked for, else the default for the KB's language (MiniLM for
        English or a language not yet known, multilingual-e5 for any other)."""
        if self._recorded or self._asked:
            return self._recorded or self._asked  # type: ignore[return-value]
        if self.language in (None, ENGLISH):
            return LOCAL_EMBEDDER
        return MULTILINGUAL_EMBEDDER

    @classmethod
    def open(cls, path: str | Path | None = None, settings: Settings | None = None,
             embedder: Embedder | None = None, create: bool = True,
             language: str | None = None) -> KnowledgeBase:
        """`path`: a folder (SQLite) or a postgresql:// URL (Postgres). `create=False`: a
        folder without a knowledge base is a UserError instead of a new empty one. `language`:
        an ISO 639-1 code or "mixed" for a new KB (else detected from its first documents);
        for an existing one it must be the recorded language."""
        settings = settings or Settings.from_env()
        backend = open_backend(path or settings.kb, create=create)
        try:
            return cls(backend, settings, embedder, language)
        except Exception:
            backend.close()
            raise

    @property
    def embedder(self) -> CachedEmbedder:
        """The (cached) embedder, loaded on first use: BM25-only work never loads a model."""
        base = self.__dict__.get("_base")
        if base is not None:  # a principal's view (for_principal): the KB's model and
            # passage cache, its queries cached apart (embed/cache.py query_space)
            if self._embedder is None:
                self._embedder = CachedEmbedder(base.embedder.inner, base.store,
                                                query_space=self.store.principal.user)
            return self._embedder
        if self._embedder is None:
            from ragloop.embed import make_embedder

            inner = self._inner or make_embedder(self.embedder_name, self.settings.embed_base_url)
            self._embedder = CachedEmbedder(inner, self.store)
        return self._embedder

    def warm_up(self) -> None:
        """Load the embedding model now (past the cache), so a timed first search does not."""
        self.embedder.inner.embed(["warm-up"])

    def embedder_for_write(self) -> CachedEmbedder:
        """The embedder, with the knowledge base's embedder name and dimension recorded."""
        emb = self.embedder
        if self.store.get_meta("embedder") is None:
            self.store.set_meta("embedder", self.embedder_name)
            self.store.set_meta("dim", str(emb.dim))
            self._recorded = self.embedder_name
        return emb

    def settle_language(self, docs: list[ParsedDocument]) -> None:
        """Before the first write: the language asked for, else the first documents'."""
        if self.store.get_meta("language") is not None:
            return
        if self.language is None:
            self.language = detect_language(s.text for d in docs for s in d.sections)
        self.store.set_language(self.language)

    def ingest(self, paths: Iterable[str | Path] | str | Path,
               progress: bool = False, admit: Admit | None = None,
               tags: Iterable[str] = (), private_urls: bool = False,
               link_local_urls: bool = False,
               access: Iterable[str] | None = None) -> IngestReport:
        """Read, chunk, embed and index files, folders (Markdown, text, HTML, PDF, Office,
        e-books, …) and web page URLs. Idempotent by content hash: an unchanged file is skipped,
        a changed one replaced. `admit`: see ingest_paths (which existing documents this ingest
        may replace); `tags`: added to every document's `tags` metadata (what `--tag` filters
        match); `private_urls`: allow URLs on loopback and private addresses (an intranet),
        which are refused by default; `link_local_urls`: allow link-local ones
        (169.254.0.0/16, fe80::/10, where cloud metadata services answer), refused even with
        `private_urls`. `access`: the users and groups who may read what is ingested where
        the source says nothing itself (front matter `access:`, a `.ragloop-access` file:
        ingest/access.py); default everyone."""
        from ragloop.ingest.pipeline import ingest_paths

        if isinstance(paths, str | Path):
            paths = [paths]
        return ingest_paths(self.store, self.embedder_for_write, paths, self.settings, progress,
                            admit, before_write=self.settle_language, tags=list(tags),
                            private_urls=private_urls, link_local_urls=link_local_urls,
                            access=None if access is None else parse_names(access))

    def sync(self, folder: str | Path, progress: bool = False,
             tags: Iterable[str] = (), allow_mass_delete: bool = False,
             access: Iterable[str] | None = None) -> IngestReport:
        """Make the knowledge base hold what `folder` holds now: new files added, changed
        ones updated (as `ingest`), and documents whose files are gone from it removed
        (`report.removed`); documents from other folders and uploads stay, and so do those
        of files that failed to read (`report.failed`).

        Nothing is removed, and `report.held` says why (`report.held_back`: what stayed), when
        the folder is gone or unreadable (before or after the ingest), or when more of its
        documents would go than the settings' sync_max_remove_count and
        sync_max_remove_share allow; `allow_mass_delete=True` removes them anyway."""
        from ragloop.ingest.pipeline import (
            IngestReport,
            folder_documents,
            folder_problem,
            mass_delete_reason,
            shown,
            stale_documents,
            unlistable_folders,
        )

        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise UserError(f"{folder}: --sync needs a folder (it removes the documents of"
                            " files gone from it)")
        problem = folder_problem(path)
        report = IngestReport() if problem else self.ingest([folder], progress, tags=tags,
                                                            access=access)
        problem = problem or folder_problem(path)  # gone while it was read
        if problem is None:  # a subfolder that cannot be listed: failed, not deleted
            report.failed += [(shown(d), why) for d, why in unlistable_folders(path)]
        mine = folder_documents(self.documents(), folder, self.store.folder)
        stale = stale_documents(mine, report)
        report.removed = []
        held = problem or mass_delete_reason(len(stale), len(mine), self.settings)
        if held and not allow_mass_delete:
            report.held = (f"nothing removed: {held}; if that is meant, sync again with"
                           f" --allow-mass-delete to remove the {len(stale)} document(s)")
            report.held_back = stale
            return report
        for doc_id in stale:
            if self.remove(doc_id):
                report.removed.append(doc_id)
                report.changes.append((doc_id, "removed"))
        return report

    def ingest_documents(self, docs: list[ParsedDocument], progress: bool = False,
                         label: str = "ingest") -> IngestReport:
        """Documents parsed elsewhere (an eval corpus), written as `ingest` writes files."""
        from ragloop.ingest.pipeline import ingest_documents

        return ingest_documents(self.store, self.embedder_for_write, docs, self.settings,
                                progress, before_write=self.settle_language, label=label)

    def search(self, query: str, k: int | None = None, mode: Mode = "hybrid",
               filter: Filter | None = None) -> list[Hit]:
        """The `k` best chunks for `query` (settings' search_k by default), best first.
        `mode`: "hybrid" (BM25 and vectors, fused), "bm25" (no model loaded) or "vector";
        `filter`: only hits from the documents it selects (applied inside both indexes: k hits
        come back whenever k chunks of those documents match)."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise UserError(f"k (the number of hits) must be a whole number of at least 1,"
                            f" not {k!r}")
        query = clean_text(query)  # undecodable bytes of a command-line argument
        if self.store.chunk_count() == 0:
            return []
        within = None
        if filter is not None and not filter.empty:
            within = filter.select(self.store.document_fields())
            if not within:
                return []
        embedder = self.embedder if mode != "bm25" else None
        return hybrid_search(self.store, embedder, query, k or self.settings.search_k, mode,
                             within)

    def section(self, doc_id: str, section: str, knowledge_base: str | None = None
                ) -> SectionInfo:
        """One section's full text (a heading with no text of its own: its subsections).
        Raises NotFoundError naming the doc_ids or sections there are. `knowledge_base`:
        which KB when several are served (kb/multi.py); one KB is the only one there is, so
        the name (a citation's `kb`, "" for one KB) is not read."""
        found = self.store.section(doc_id, str(section))
        if found is not None:
            return found
        sections = self.store.sections(doc_id)
        if not sections:
            raise NotFoundError(f"No document {doc_id!r} in the knowledge base;"
                                " `ragloop docs` lists the doc_ids.")
        parent = _parent_section(str(section), sections)
        if parent is not None:
            return parent
        ids = ", ".join(s.section for s in sections[:40])
        raise NotFoundError(f"Document {doc_id!r} has no section {section!r}; its sections: {ids}")

    def sections(self, doc_id: str) -> list[SectionInfo]:
        """A document's sections in reading order."""
        return self.store.sections(doc_id)

    def documents(self) -> list[DocumentInfo]:
        """Every document: doc_id, title, source, section and chunk counts."""
        return self.store.documents()

    def remove(self, doc_id: str) -> bool:
        """Delete a document, its sections, chunks and index entries; False if it was not there."""
        return self.store.remove_document(doc_id)

    def for_principal(self, principal: Principal | None) -> KnowledgeBase:
        """This knowledge base as `principal` sees it: the documents it may not read are not
        there, for every search, listing and fetch (kb/access.py), and the chunk ids it shows
        say nothing of them (kb/public_ids.py). An admin (or None) sees it all: the knowledge
        base itself, its ids the store's. One view per principal, kept, so what is made from
        its content (offline/content_cache.py) is made once per principal and version."""
        if principal is None or principal.admin:
            return self
        with _VIEWS_LOCK:
            views = self.__dict__.setdefault("_views", {})
            view = views.get(principal)
            if view is None:
                from ragloop.kb.access import ReadableStore
                from ragloop.kb.public_ids import ShownIds

                view = copy.copy(self)
                view.__dict__.pop("_views", None)
                # its chunk ids through the KB's permutation: they do not count hidden ones
                view.store = ShownIds(ReadableStore(self.store, principal))  # type: ignore[assignment]
                view._base = self  # the embedder is the KB's own model (and passage cache)
                view._embedder = None
                view.close = lambda: None  # type: ignore[method-assign]  # the KB's to close
                views[principal] = view
            return view

    def close(self) -> None:
        """Closes the backend: the store and, if one was borrowed, the run store."""
        self.backend.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kb_language(store: Store, asked: str | None) -> str | None:
    """The recorded language (for a KB made before languages had a record, the store's
    default: English, or a Postgres KB's ts_config language), checked
    against the one asked for; None for a new KB nobody asked a language of (detected later)."""
    recorded = store.get_meta("language")
    if recorded is None and store.chunk_count():
        # SQLite: English; Postgres: the language of its text search configuration
        recorded = store.language()
    if asked is not None:
        asked = get_language(asked).code
    if recorded is not None and asked is not None and asked != recorded:
        raise LanguageMismatchError(
            f"This knowledge base is in {get_language(recorded).name} ({recorded!r}), not"
            f" {asked!r}: its full-text index is built with that language's analyzer. Drop"
            f" --language (or RAGLOOP_LANGUAGE), or ingest into a new --kb folder.")
    return recorded or asked


def _parent_section(section: str, sections: list[SectionInfo]) -> SectionInfo | None:
    """A heading with no text of its own ("7", whose text is all in 7.1-7.4) read as its
    subsections, each under its title, so "section 7" can be fetched as a whole."""
    children = [s for s in sections if s.section.startswith(section + ".")]
    if not section or not children:
        return None
    first = children[0]
    # the parent's title path is the child's without the levels below the parent
    below = len(first.section.split(".")) - len(section.split("."))
    path = first.title_path[:max(1, len(first.title_path) - below)]
    title = path[-1] if len(path) > 1 else section
    # each title ends a line of its own with a full stop, so no sentence runs into it
    text = "\n\n".join(f"{c.title.rstrip('.')}.\n{c.text.strip()}" if c.title
                       else c.text.strip() for c in children)
    return SectionInfo(doc_id=first.doc_id, section=section, title=title,
                       title_path=tuple(path), text=text, ord=first.ord)
