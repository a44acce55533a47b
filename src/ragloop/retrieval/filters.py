"""Search filters: which documents a search may return hits from.

One `Filter` for the Python API, the CLI, the HTTP API and the search tool. A filter names
documents (by source path or glob, doc id prefix, metadata the reader found or the ingest's
`--tag`s, a date range); a store searches its two indexes within those documents, so a
filtered search returns k hits whenever k chunks match, not the part of an unfiltered top k
that passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from ragloop.core.errors import UserError

#: the metadata key a date range is read from (readers store dates as ISO 8601 text)
DATE_KEY = "date"


@dataclass(frozen=True)
class Filter:
    """Every given part must match (AND); within a part, any value matches (OR).

    - `sources`: globs (fnmatch: `*`, `?`, `[...]`) over a document's source path or URL;
      a value without a glob character matches that source or anything under it.
    - `doc_prefixes`: doc id prefixes.
    - `metadata`: (key, value) pairs; a list-valued field (`tags`) matches if it holds the
      value. Case is ignored in both.
    - `date_from` / `date_to`: inclusive bounds on the `date` metadata field (ISO text
      compared by prefix: `2024` and `2024-03` are valid bounds); a document without a date
      is outside any range.
    - `knowledge_bases`: names of the knowledge bases to search when several are served
      (kb/multi.py); one knowledge base has no name and reads none. `empty` is about the
      documents only.
    """

    sources: tuple[str, ...] = ()
    doc_prefixes: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    date_from: str | None = None
    date_to: str | None = None
    knowledge_bases: tuple[str, ...] = ()
    _meta: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        grouped: dict[str, set[str]] = {}
        for key, value in self.metadata:
            grouped.setdefault(key.strip().lower(), set()).add(value.strip().lower())
        self._meta.update(grouped)

    @property
    def empty(self) -> bool:
        return not (self.sources or self.doc_prefixes or self.metadata or self.date_from
                    or self.date_to)

    def matches(self, doc_id: str, source: str, metadata: Mapping[str, Any]) -> bool:
        if self.doc_prefixes and not any(doc_id.startswith(p) for p in self.doc_prefixes):
            return False
        if self.sources and not any(_source_matches(source, s) for s in self.sources):
            return False
        for key, wanted in self._meta.items():
            have = metadata.get(key)
            values = have if isinstance(have, list) else [have] if have is not None else []
            if not any(str(v).lower() in wanted for v in values):
                return False
        if self.date_from or self.date_to:
            date = metadata.get(DATE_KEY)
            if not isinstance(date, str) or not date:
                return False
            if self.date_from and date[:len(self.date_from)] < self.date_from:
                return False
            if self.date_to and date[:len(self.date_to)] > self.date_to:
                return False
        return True

    def select(self, documents: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
        """The doc ids of (doc_id, source, metadata) rows that match, in the order given."""
        return [d for d, src, meta in documents if self.matches(d, src, meta)]

    def to_dict(self) -> dict[str, Any]:
        return {"source": list(self.sources), "doc_id_prefix": list(self.doc_prefixes),
                "metadata": [f"{k}={v}" for k, v in self.metadata],
                "date_from": self.date_from, "date_to": self.date_to,
                **({"knowledge_base": list(self.knowledge_bases)} if self.knowledge_bases
                   else {})}


def _source_matches(source: str, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatchcase(source, pattern)
    return source == pattern or source.startswith(pattern.rstrip("/") + "/")


def _pairs(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"A metadata filter is KEY=VALUE (e.g. author=Jane Doe), not"
                            f" {item!r}.")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def make_filter(*, source: Iterable[str] = (), doc_id_prefix: Iterable[str] = (),
                metadata: Iterable[str] = (), tag: Iterable[str] = (),
                date_from: str | None = None, date_to: str | None = None,
                knowledge_base: Iterable[str] = ()) -> Filter | None:
    """A Filter from the strings a user gives (CLI options, query parameters, tool
    arguments); None when nothing is asked. `metadata`: KEY=VALUE strings; `tag`: tags;
    `knowledge_base`: names of served knowledge bases."""
    for name, bound in (("date_from", date_from), ("date_to", date_to)):
        if bound is not None and not _is_date_prefix(bound):
            raise UserError(f"{name} is a date as YYYY, YYYY-MM or YYYY-MM-DD, not {bound!r}.")
    flt = Filter(sources=tuple(s for s in source if s), doc_prefixes=tuple(p for p in
                 doc_id_prefix if p),
                 metadata=_pairs(metadata) + tuple(("tags", t) for t in tag if t.strip()),
                 date_from=date_from or None, date_to=date_to or None,
                 knowledge_bases=tuple(n.strip() for n in knowledge_base if n.strip()))
    return None if flt.empty and not flt.knowledge_bases else flt


def _is_date_prefix(text: str) -> bool:
    parts = text.split("-")
    return (1 <= len(parts) <= 3 and len(parts[0]) == 4
            and all(p.isdigit() for p in parts) and all(len(p) == 2 for p in parts[1:]))
