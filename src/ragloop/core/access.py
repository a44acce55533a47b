"""Who asks, and who may read a document: the one rule every path applies (issue 43).

A `Principal` is a user and the groups it belongs to. A document's access is a list of user
and group names (front matter `access: [hr, managers]`, a folder's `.ragloop-access` file, the
ingest option; ingest/access.py); a document without one is readable by everyone who may use
the knowledge base, and so is one whose list names `everyone`. An admin principal (the single
`RAGLOOP_API_KEY`, the keyless server on loopback, the CLI) reads every document.

API keys are random tokens (`secrets`, 256 bits); only their SHA-256 is stored, and a token is
shown once, when it is made. A hash of a high-entropy secret needs no slow KDF: nothing can be
guessed from it (the reason password hashing is slow is low-entropy input).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ragloop.core.errors import UserError

#: the metadata key a document's access list is stored under (both stores keep metadata)
ACCESS_KEY = "access"
#: the name meaning "everyone who may use this knowledge base"
EVERYONE = "everyone"
# names: what a user or group may be called (an e-mail address fits); no ":" so that the
# built-in principals below can never be a stored user
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._@+-]{0,63}")
RESERVED = frozenset({EVERYONE})
KEY_PREFIX = "rlk_"


def check_name(raw: str, what: str = "name") -> str:
    """A user or group name, lower case; a UserError saying what is allowed otherwise."""
    name = raw.strip().lower()
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(f"{what} {raw!r} is not valid: use 1-64 letters, digits and . _ @ + -"
                        " (starting with a letter or digit).")
    return name


def parse_names(values: Iterable[Any] | str) -> list[str]:
    """Names from a list or a text of names separated by commas, spaces or new lines (a
    `#` starts a comment); sorted, repeats dropped."""
    if isinstance(values, str):
        values = [values]
    found: set[str] = set()
    for value in values:
        for line in str(value).splitlines():
            for part in re.split(r"[,\s]+", line.split("#", 1)[0]):
                if part:
                    found.add(check_name(part))
    return sorted(found)


def stored_access(names: Iterable[str]) -> list[str] | None:
    """What a document keeps: None (everyone; nothing stored, so a KB without rules is
    written exactly as before) or its sorted names (none: admins only)."""
    names = sorted(set(names))
    return None if EVERYONE in names else names


@dataclass(frozen=True)
class Principal:
    """The asker. `admin`: reads every document (and manages the others' runs)."""

    user: str
    groups: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False

    @property
    def names(self) -> frozenset[str]:
        return self.groups | {self.user}

    def may_read(self, metadata: dict[str, Any]) -> bool:
        """Whether this principal may read a document with `metadata`."""
        if self.admin:
            return True
        access = metadata.get(ACCESS_KEY)
        if access is None:
            return True
        names = [access] if isinstance(access, str) else list(access)
        return EVERYONE in names or not self.names.isdisjoint(names)


def principal_to_dict(principal: Principal | None) -> dict[str, Any] | None:
    """A principal as JSON (a queued run carries its asker's to the worker)."""
    if principal is None:
        return None
    return {"user": principal.user, "groups": sorted(principal.groups), "admin": principal.admin}


def principal_from_dict(data: Any) -> Principal | None:
    if not isinstance(data, dict):
        return None
    return Principal(user=str(data["user"]), groups=frozenset(data.get("groups") or ()),
                     admin=bool(data.get("admin")))


#: the single RAGLOOP_API_KEY, the keyless loopback server, the CLI and Python by default
ADMIN = Principal(user=":admin", admin=True)


def new_key() -> tuple[str, str, str]:
    """(key id, the token to hand out, its hash to store). The id is public (listed,
    revoked by); the token is `rlk_<id>_<secret>`."""
    key_id = secrets.token_hex(4)
    token = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return key_id, token, hash_key(token)


def hash_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
