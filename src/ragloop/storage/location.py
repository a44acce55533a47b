"""What kind of knowledge base a location names: a `postgresql://` URL, or a folder."""

from __future__ import annotations


def is_postgres_url(location: object) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))
