"""A document's metadata as readers find it (Markdown front matter, PDF / Office properties),
made flat and comparable: lower-case keys, text values (lists of text for lists), dates as ISO
8601 text so that a date range is a comparison of strings (retrieval/filters.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ragloop.core.access import ACCESS_KEY

# Longer values are not metadata a filter would match (a description, an abstract).
MAX_VALUE_CHARS = 300


def _value(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(timespec="seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool | int | float | str):
        text = " ".join(str(value).split())
        return text[:MAX_VALUE_CHARS] or None
    return None  # nested mappings and other objects: not filterable


def clean_metadata(raw: Mapping[Any, Any] | None) -> dict[str, Any]:
    """Flat metadata: {key: text or [text, ...]}; empty values and nested mappings dropped."""
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        name = " ".join(str(key).split()).lower()
        if not name:
            continue
        if isinstance(value, list | tuple | set):
            items = [v for v in (_value(x) for x in value) if v]
            if items or name == ACCESS_KEY:  # `access: []` names nobody: admins only
                out[name] = items
        elif name == ACCESS_KEY and _value(value) is None:
            out[name] = []  # `access:` left empty also names nobody, never "everyone"
        elif (text := _value(value)) is not None:
            out[name] = text
    return out


def with_tags(metadata: Mapping[str, Any], tags: list[str]) -> dict[str, Any]:
    """`metadata` with the ingest's `--tag`s added to the document's own `tags`."""
    out = dict(metadata)
    own = out.get("tags", [])
    own = [own] if isinstance(own, str) else list(own)
    out["tags"] = sorted(set(own) | {t.strip() for t in tags if t.strip()})
    return out
