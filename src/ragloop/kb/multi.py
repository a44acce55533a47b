"""Several named knowledge bases served as one: what the engine, the tools, the server and
the MCP server search when a catalog (kb/catalog.py) names more than one.

It answers the calls an engine makes of a `KnowledgeBase` (search, section, sections,
documents, language, embedder, backend), each result naming its knowledge base (`kb`).

Merging: each KB's hits are ranked by its own hybrid search, and fused scores of different
KBs are not comparable as they are (BM25's idf and the fused rank scale depend on each corpus).
So the lists are fused by rank (reciprocal rank fusion, retrieval/fusion.py's constant): the
r-th hit of every KB searched scores 1/(RRF_K + r), ties going to the KB the source chooser
scored higher for the query (the cosine of its closest chunk, comparable across KBs built with
the same embedder). Which KBs are searched is the chooser's (offline/source_choice.py) unless
the caller names them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ragloop.core.access import Principal
from ragloop.core.config import Settings
from ragloop.core.decisions import SourceChoice, SourceChooser
from ragloop.core.errors import NotFoundError, UserError
from ragloop.core.types import DocumentInfo, Hit, SectionInfo
from ragloop.embed.cache import CachedEmbedder
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.filters import Filter
from ragloop.retrieval.fusion import Mode
from ragloop.storage.protocols import Backend

RRF_K = 60
# chunk ids are per store: each KB's are moved into a range of their own so hits of two KBs
# never share one (the ledger and the grader key evidence by chunk id)
_ID_STRIDE = 1 << 40


_ONE_TO_WRITE = ("Several knowledge bases are served: documents are added to one of them,"
                 " with `ragloop ingest PATH --kb LOCATION` (its folder or URL).")


@dataclass
class RunSources:
    """The knowledge bases a run's searches go to when they name none (the engine makes one
    per run and hands it to the run's toolboxes): set from the whole question's choice when
    it is one KB (a part such as "how soon must the committee be told"
    lacks the words that place it; the question has them); None: each query chooses."""

    knowledge_bases: tuple[str, ...] | None = None
    pinned: bool = False  # the caller named them (an OpenAI client's model): never chosen
    #: each query's choice, made once in the run (`KnowledgeBases.for_run`): the offline
    #: chooser runs a vector search per KB, and the router, the source step, the search and
    #: the follow-ups each ask it of the same question or part
    choices: dict[str, SourceChoice] = field(default_factory=dict)


class UnknownKnowledgeBase(UserError):
    """A name that is not in the catalog; the message lists the names there are."""


class AmbiguousDocument(NotFoundError):
    """A doc id that several KBs hold, read without naming one; `holding` names them (each
    app says how to name one: the message says it in the tools' words)."""

    def __init__(self, doc_id: str, holding: Sequence[str]) -> None:
        super().__init__(f"The doc_id {doc_id!r} is in several knowledge bases"
                         f" ({', '.join(holding)}): name the knowledge_base.")
        self.doc_id = doc_id
        self.holding = list(holding)


class _Stores:
    """The part of a store that readers of a run read of a view: the chunk count of all,
    a generation that changes when any KB's does (what is made from the content of all is
    made again then: offline/content_cache.py), and chunks by the view's ids (the eval's
    grade summaries)."""

    def __init__(self, kbs: Sequence[KnowledgeBase]) -> None:
        self._kbs = kbs

    def chunk_count(self) -> int:
        return sum(kb.store.chunk_count() for kb in self._kbs)

    def generation(self) -> tuple[int, ...]:
        return tuple(kb.store.generation() for kb in self._kbs)

    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]:
        by_kb: dict[int, list[int]] = {}
        for i in ids:
            by_kb.setdefault(i // _ID_STRIDE, []).append(i % _ID_STRIDE)
        out: dict[int, Hit] = {}
        for index, own in by_kb.items():
            if 0 <= index < len(self._kbs):
                for cid, hit in self._kbs[index].store.chunks(own).items():
                    out[cid + index * _ID_STRIDE] = hit
        return out


class KnowledgeBases:
    """Named knowledge bases searched as one. The first holds the runs (its run store and
    queue), so a server's conversations and queue live in one place."""

    def __init__(self, kbs: dict[str, KnowledgeBase], descriptions: dict[str, str],
                 chooser: SourceChooser | None = None) -> None:
        if not kbs:
            raise UserError("no knowledge bases to serve")
        self.kbs = kbs
        self._descriptions = {name: descriptions.get(name, "") for name in kbs}
        self.chooser = chooser  # None: every KB is searched unless a call names some
        self.run: RunSources | None = None  # a run's view (for_run): its choices remembered
        first = next(iter(kbs.values()))
        self.settings: Settings = first.settings
        self.backend: Backend = first.backend
        self.store = _Stores(list(kbs.values()))
        # one language's offline rules read the run; a mixed catalog reads as the first's
        self.language = first.language

    # -- the catalog ----------------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self.kbs)

    def descriptions(self) -> dict[str, str]:
        """Each name's one-line description (what the tool schema and /v1/models show)."""
        return dict(self._descriptions)

    def listing(self) -> str:
        """The names there are, each with its description (what an error lists)."""
        return "; ".join(f"{n} ({d})" if d else n for n, d in self._descriptions.items())

    def get(self, name: str) -> KnowledgeBase:
        try:
            return self.kbs[name]
        except KeyError:
            raise UnknownKnowledgeBase(
                f"unknown knowledge base {name!r}; the knowledge bases are: {self.listing()}"
            ) from None

    def target(self, name: str | None, how: str) -> KnowledgeBase:
        """The one KB a write (an upload, a synced folder) goes to: the one `name` names, or
        the only one served; several and none named: an error saying `how` to name one and
        listing the names."""
        if name:
            return self.get(name)
        if len(self.kbs) == 1:
            return next(iter(self.kbs.values()))
        raise UnknownKnowledgeBase(
            f"Several knowledge bases are served: name the one to write to ({how}); the"
            f" knowledge bases are: {self.listing()}")

    def names_of(self, names: Sequence[str]) -> list[str]:
        """`names`, each checked (UnknownKnowledgeBase lists the names there are)."""
        return self._named(list(names)) or []

    def _named(self, knowledge_base: str | Sequence[str] | None) -> list[str] | None:
        if knowledge_base is None or knowledge_base == "" or knowledge_base == []:
            return None
        names = [knowledge_base] if isinstance(knowledge_base, str) else list(knowledge_base)
        for n in names:
            self.get(n)
        return names

    @property
    def embedder(self) -> CachedEmbedder:
        """The first KB's embedder: what the offline grader and answerer embed hits with
        (hits carry their text, so any KB's are graded alike)."""
        return next(iter(self.kbs.values())).embedder

    def warm_up(self) -> None:
        for kb in self.kbs.values():
            kb.warm_up()

    # -- searching ------------------------------------------------------------------------

    def for_principal(self, principal: Principal | None) -> KnowledgeBases:
        """These knowledge bases as `principal` sees them: each one's view (kb/access.py);
        kept per principal. An admin (or None): these themselves."""
        if principal is None or principal.admin:
            return self
        views = self.__dict__.setdefault("_views", {})
        view = views.get(principal)
        if view is None:
            view = copy.copy(self)
            view.__dict__.pop("_views", None)
            view.kbs = {n: kb.for_principal(principal) for n, kb in self.kbs.items()}
            view.store = _Stores(list(view.kbs.values()))
            # the chooser reads what each KB holds: the view's own (the engine makes it)
            view.chooser = None
            views[principal] = view
        return view

    def for_run(self, sources: RunSources) -> KnowledgeBases:
        """These knowledge bases as one run reads them: each query's choice is made once and
        kept in `sources.choices` (a view sharing the open KBs; never closed itself)."""
        view = copy.copy(self)
        view.run = sources
        return view

    def choose(self, query: str) -> SourceChoice:
        """The KBs `query` is searched in when the caller names none, and why."""
        if self.chooser is None or len(self.kbs) == 1:
            return SourceChoice(tuple(self.kbs), "every knowledge base is searched")
        if self.run is None:
            return self.chooser.choose(query)
        choice = self.run.choices.get(query)
        if choice is None:
            choice = self.run.choices[query] = self.chooser.choose(query)
        return choice

    def search(self, query: str, k: int | None = None, mode: Mode = "hybrid",
               filter: Filter | None = None,
               knowledge_base: str | Sequence[str] | None = None) -> list[Hit]:
        """The `k` best chunks of the KBs named (here or by `filter.knowledge_bases`; none:
        the chooser's), merged by rank."""
        names = self._named(knowledge_base or (filter.knowledge_bases if filter else None))
        if names is None:
            names = list(self.choose(query).knowledge_bases)
        k = k or self.settings.search_k
        order = {n: i for i, n in enumerate(names)}
        ranked: list[tuple[float, int, int, Hit]] = []
        for name in names:
            index = list(self.kbs).index(name)
            hits = self.kbs[name].search(query, k, mode, filter)
            for rank, h in enumerate(hits, 1):
                tagged = replace(h, kb=name, chunk_id=h.chunk_id + index * _ID_STRIDE)
                ranked.append((1.0 / (RRF_K + rank), -order[name], -rank, tagged))
        ranked.sort(key=lambda t: (t[0], t[1], t[2]), reverse=True)
        return [replace(h, score=score) for score, _, _, h in ranked[:k]]

    # -- reading --------------------------------------------------------------------------

    def _holding(self, doc_id: str, knowledge_base: str | None) -> list[str]:
        if knowledge_base:
            self.get(knowledge_base)
            return [knowledge_base]
        return [n for n, kb in self.kbs.items() if kb.store.sections(doc_id)]

    def section(self, doc_id: str, section: str, knowledge_base: str | None = None
                ) -> SectionInfo:
        """One section of a document; `knowledge_base` names the KB when the doc id is in
        several (else a NotFoundError says which hold it)."""
        name = self.holder(doc_id, knowledge_base)
        return replace(self.kbs[name].section(doc_id, section), kb=name)

    def holder(self, doc_id: str, knowledge_base: str | None = None) -> str:
        """The name of the KB holding `doc_id` (`knowledge_base` when given, checked):
        NotFoundError when none does, AmbiguousDocument when several do."""
        holding = self._holding(doc_id, knowledge_base)
        if not holding:
            raise NotFoundError(f"No document {doc_id!r} in the knowledge bases"
                                f" ({', '.join(self.kbs)}); list_documents lists the doc_ids.")
        if len(holding) > 1:
            raise AmbiguousDocument(doc_id, holding)
        return holding[0]

    def sections(self, doc_id: str, knowledge_base: str | None = None) -> list[SectionInfo]:
        for name in self._holding(doc_id, knowledge_base):
            return [replace(s, kb=name) for s in self.kbs[name].sections(doc_id)]
        return []

    def documents(self) -> list[DocumentInfo]:
        """Every document of every KB, each naming its KB."""
        return [replace(d, kb=name) for name, kb in self.kbs.items() for d in kb.documents()]

    def remove(self, doc_id: str, knowledge_base: str | None = None) -> bool:
        """Delete a document from the KB holding it (named when the doc id is in several)."""
        holding = self._holding(doc_id, knowledge_base)
        if len(holding) > 1:
            raise UserError(f"The doc_id {doc_id!r} is in several knowledge bases"
                            f" ({', '.join(holding)}): name the knowledge base.")
        return bool(holding) and self.kbs[holding[0]].remove(doc_id)

    def ingest(self, *_args: object, **_kw: object) -> Any:
        raise UserError(_ONE_TO_WRITE)

    def sync(self, *_args: object, **_kw: object) -> Any:
        raise UserError(_ONE_TO_WRITE)

    def close(self) -> None:
        for kb in self.kbs.values():
            kb.close()

    def __enter__(self) -> KnowledgeBases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def own_name(kb: KnowledgeBase) -> str:
    """The name of one KB served alone: its folder's name, or a `postgresql://` URL's
    database name (never the URL: it may hold a password)."""
    location = str(kb.settings.kb)
    if "://" in location:
        return urlsplit(location).path.rstrip("/").rpartition("/")[2] or "kb"
    return Path(location).resolve().name or "kb"


def served_catalog(kb: KnowledgeBase | KnowledgeBases) -> list[dict[str, Any]]:
    """Name, description and document count of each KB served (the API's listing; one KB
    served alone is named by `own_name` and has its stored description, if any)."""
    if isinstance(kb, KnowledgeBases):
        return [{"name": n, "description": d, "documents": len(kb.kbs[n].documents())}
                for n, d in kb.descriptions().items()]
    return [{"name": own_name(kb), "description": kb.store.get_meta("description") or "",
             "documents": len(kb.documents())}]


def as_knowledge_bases(kb: KnowledgeBase | KnowledgeBases) -> KnowledgeBases | None:
    """The catalog behind `kb` when it serves several (else None)."""
    return kb if isinstance(kb, KnowledgeBases) else None


def write_target(kb: KnowledgeBase | KnowledgeBases, name: str | None, how: str
                 ) -> KnowledgeBase:
    """The KB a write goes to (see `KnowledgeBases.target`). One KB served alone takes no
    name or its own (`own_name`): naming another is refused rather than read as it, since
    the writer meant another."""
    if isinstance(kb, KnowledgeBases):
        return kb.target(name, how)
    if name and name != own_name(kb):  # the name the listing gives it is that KB
        raise UnknownKnowledgeBase(
            f"One knowledge base is served, {own_name(kb)!r}: leave the name {name!r} out"
            f" (names are given when several are served: {how}).")
    return kb
