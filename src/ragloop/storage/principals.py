"""Users, their groups and their API keys, in the knowledge base's own storage (the SQLite
file or the Postgres database that holds its runs): one implementation over either, as both
speak the same SQL here and differ only in the parameter mark.

Keys are stored as their SHA-256 only (core/access.py); a token is returned once, by
`add_key`, and never written to a log or the database.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypedDict

from ragloop.core.access import RESERVED, Principal, check_name, hash_key, new_key
from ragloop.core.errors import NotFoundError, UserError

#: the tables, the same in both stores (Postgres's migration 7 runs this too)
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, member_of TEXT NOT NULL"
    " DEFAULT '[]', admin INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS api_keys (key_id TEXT PRIMARY KEY, user_name TEXT NOT NULL"
    " REFERENCES users(name) ON DELETE CASCADE, key_hash TEXT NOT NULL UNIQUE,"
    " label TEXT NOT NULL DEFAULT '', created_at DOUBLE PRECISION NOT NULL,"
    " revoked_at DOUBLE PRECISION)",
)


class UserRecord(TypedDict):
    name: str
    groups: list[str]
    admin: bool
    created_at: float
    keys: int  # active keys


class KeyRecord(TypedDict):
    key_id: str
    user: str
    label: str
    created_at: float
    revoked_at: float | None


class _Cursor(Protocol):
    rowcount: int

    def fetchall(self) -> list[Any]: ...


class _Connection(Protocol):
    def execute(self, query: str, params: Any = ...) -> _Cursor: ...


class PrincipalStore:
    """`connection()`: a context manager giving a connection that commits on exit (SQLite
    in autocommit mode under a lock; a Postgres pool connection in autocommit mode);
    `mark`: "?" or "%s"."""

    def __init__(self, connection: Callable[[], AbstractContextManager[_Connection]],
                 mark: str = "?") -> None:
        self._connection = connection
        self._mark = mark

    def _run(self, query: str, *params: Any) -> _Cursor:
        with self._connection() as conn:
            return conn.execute(query.replace("?", self._mark), params)

    def _rows(self, query: str, *params: Any) -> list[Any]:
        with self._connection() as conn:
            return list(conn.execute(query.replace("?", self._mark), params).fetchall())

    # -- users ----------------------------------------------------------------------------

    def add_user(self, name: str, groups: list[str] | None = None, admin: bool = False) -> str:
        """Create a user, or set an existing one's groups and admin flag; its name."""
        name = check_name(name, "user name")
        if name in RESERVED:
            raise UserError(f"{name!r} is a reserved name (it means every user).")
        groups = sorted({check_name(g, "group name") for g in groups or []})
        self._run("INSERT INTO users(name, member_of, admin, created_at) VALUES (?, ?, ?, ?)"
                  " ON CONFLICT (name) DO UPDATE SET member_of = excluded.member_of,"
                  " admin = excluded.admin", name, json.dumps(groups), int(admin), time.time())
        return name

    def remove_user(self, name: str) -> bool:
        """Remove a user and its keys; False when there was none."""
        return self._run("DELETE FROM users WHERE name = ?", name.strip().lower()).rowcount > 0

    def users(self) -> list[UserRecord]:
        rows = self._rows(
            "SELECT u.name, u.member_of, u.admin, u.created_at, (SELECT count(*) FROM api_keys k"
            " WHERE k.user_name = u.name AND k.revoked_at IS NULL) FROM users u ORDER BY u.name")
        return [UserRecord(name=r[0], groups=json.loads(r[1]), admin=bool(r[2]),
                           created_at=float(r[3]), keys=int(r[4])) for r in rows]

    # -- keys -----------------------------------------------------------------------------

    def add_key(self, user: str, label: str = "") -> tuple[str, str]:
        """A new key for `user`: (key id, token). The token is shown once; only its hash is
        kept."""
        user = user.strip().lower()
        if not self._rows("SELECT 1 FROM users WHERE name = ?", user):
            raise NotFoundError(f"No user {user!r}; add one with `ragloop users add {user}`.")
        key_id, token, digest = new_key()
        self._run("INSERT INTO api_keys(key_id, user_name, key_hash, label, created_at)"
                  " VALUES (?, ?, ?, ?, ?)", key_id, user, digest, label.strip(), time.time())
        return key_id, token

    def revoke_key(self, key_id: str) -> bool:
        """Revoke a key by its id; False when no active key has it."""
        return self._run("UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at"
                         " IS NULL", time.time(), key_id.strip()).rowcount > 0

    def api_keys(self) -> list[KeyRecord]:
        rows = self._rows("SELECT key_id, user_name, label, created_at, revoked_at FROM api_keys"
                          " ORDER BY created_at")
        return [KeyRecord(key_id=r[0], user=r[1], label=r[2], created_at=float(r[3]),
                          revoked_at=None if r[4] is None else float(r[4])) for r in rows]

    def has_keys(self) -> bool:
        """Whether any key is active: then every request must present one."""
        return bool(self._rows("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def principal(self, token: str) -> Principal | None:
        """The user an active key names, with its groups; None for any other token. Looked up
        by the token's hash (equal hashes of a 256-bit secret: nothing to time)."""
        rows = self._rows("SELECT u.name, u.member_of, u.admin FROM api_keys k JOIN users u ON"
                          " u.name = k.user_name WHERE k.key_hash = ? AND k.revoked_at IS NULL",
                          hash_key(token))
        if not rows:
            return None
        name, groups, admin = rows[0]
        return Principal(user=name, groups=frozenset(json.loads(groups)), admin=bool(admin))

    def principal_of(self, user: str) -> Principal:
        """The stored user `user` as a principal (`--as USER`, `Engine(principal=...)`)."""
        rows = self._rows("SELECT name, member_of, admin FROM users WHERE name = ?",
                          user.strip().lower())
        if not rows:
            raise NotFoundError(f"No user {user!r}; `ragloop users list` lists them.")
        name, groups, admin = rows[0]
        return Principal(user=name, groups=frozenset(json.loads(groups)), admin=bool(admin))

    def close(self) -> None:
        """The connection is the backend's (closed with it)."""


def sqlite_connection(db: Any, lock: Any) -> Callable[[], AbstractContextManager[Any]]:
    """A `connection()` over one sqlite3 connection in autocommit mode, under `lock`."""
    from contextlib import contextmanager

    @contextmanager
    def connection() -> Iterator[Any]:
        with lock:
            yield db

    return connection
