"""`ragloop users …` and `ragloop keys …`: who may use a server, kept in the knowledge base
(storage/principals.py). A key's token is printed once, when it is made; only its hash is kept."""

from __future__ import annotations

import datetime as dt
import sys
from contextlib import closing
from typing import Annotated

import typer

from ragloop.apps.cli_base import JsonOpt, KbOpt, _Command, _Group, emit_json, open_backend, out
from ragloop.apps.terminal import shown

users_app = typer.Typer(cls=_Group, no_args_is_help=True,
                        help="Users and their groups (who may read which documents).")
keys_app = typer.Typer(cls=_Group, no_args_is_help=True,
                       help="API keys: each names its user; stored hashed.")
access_app = typer.Typer(cls=_Group, no_args_is_help=True,
                         help="The admin's view: who may read a document, what a user sees.")


def _when(ts: float | None) -> str:
    return "" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M")


@users_app.command("add", cls=_Command)
def users_add(name: str,
              group: Annotated[list[str] | None, typer.Option(
                  "--group", help="A group the user belongs to (repeatable); an existing"
                  " user's groups are replaced.")] = None,
              admin: Annotated[bool, typer.Option(
                  "--admin", metavar="", help="Reads every document.")] = False,
              kb: KbOpt = None) -> None:
    """Add a user (or set an existing one's groups)."""
    with closing(open_backend(kb)) as backend:
        made = backend.principals.add_user(name, group or [], admin)
    out.print(f"user {shown(made)}: groups {', '.join(sorted(group or [])) or '(none)'}"
              f"{' (admin)' if admin else ''}")


@users_app.command("list", cls=_Command)
def users_list(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """The users, their groups and how many active keys each has."""
    with closing(open_backend(kb)) as backend:
        users = backend.principals.users()
    if as_json:
        emit_json(users)
        return
    for u in users:
        out.print(f"{shown(u['name'])}\t{','.join(u['groups'])}\t"
                  f"{'admin' if u['admin'] else ''}\t{u['keys']} key(s)")


@users_app.command("remove", cls=_Command)
def users_remove(name: str, kb: KbOpt = None) -> None:
    """Remove a user and revoke its keys."""
    with closing(open_backend(kb)) as backend:
        if not backend.principals.remove_user(name):
            from ragloop.core.errors import NotFoundError

            raise NotFoundError(f"No user {name!r}; `ragloop users list` lists them.")
    out.print(f"removed user {shown(name)}")


@keys_app.command("add", cls=_Command)
def keys_add(user: str,
             label: Annotated[str, typer.Option(help="What the key is for.")] = "",
             kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Make a key for USER; the token is printed once (keep it: only its hash is stored)."""
    with closing(open_backend(kb)) as backend:
        key_id, token = backend.principals.add_key(user, label)
    if as_json:
        emit_json({"key_id": key_id, "user": user, "token": token})
        return
    sys.stderr.write(f"key {key_id} for {user}; the token is shown once:\n")
    sys.stdout.write(token + "\n")


@keys_app.command("list", cls=_Command)
def keys_list(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Every key: its id, user, label, when it was made and revoked (never the token)."""
    with closing(open_backend(kb)) as backend:
        keys = backend.principals.api_keys()
    if as_json:
        emit_json(keys)
        return
    for k in keys:
        state = f"revoked {_when(k['revoked_at'])}" if k["revoked_at"] else "active"
        out.print(f"{k['key_id']}\t{shown(k['user'])}\t{shown(k['label'])}\t"
                  f"{_when(k['created_at'])}\t{state}")


@keys_app.command("revoke", cls=_Command)
def keys_revoke(key_id: str, kb: KbOpt = None) -> None:
    """Revoke a key by its id (`ragloop keys list`)."""
    with closing(open_backend(kb)) as backend:
        if not backend.principals.revoke_key(key_id):
            from ragloop.core.errors import NotFoundError

            raise NotFoundError(f"No active key {key_id!r}; `ragloop keys list` lists them.")
    out.print(f"revoked key {shown(key_id)}")


@access_app.command("who", cls=_Command)
def access_who(doc_id: str, kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """Who may read DOC_ID: its access list and the users it lets in."""
    from ragloop.kb.access import readers, stored_principals

    with closing(open_backend(kb)) as backend:
        found = readers(backend.store.documents(), doc_id,
                        stored_principals(backend.principals.users()))
    if found is None:
        from ragloop.core.errors import NotFoundError

        raise NotFoundError(f"No document {doc_id!r}; `ragloop docs` lists the doc_ids.")
    if as_json:
        emit_json(found)
        return
    access = found["access"]
    rule = "everyone" if access is None else ", ".join(access) or "admins only"
    out.print(f"{shown(doc_id)}: access {shown(rule)}")
    out.print(f"users who may read it: {', '.join(found['users']) or '(none)'}")


@access_app.command("docs", cls=_Command)
def access_docs(user: str, kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """The documents USER may read (as `ragloop docs --as USER`, ids only)."""
    from ragloop.kb.access import ReadableStore

    with closing(open_backend(kb)) as backend:
        principal = backend.principals.principal_of(user)
        documents = ReadableStore(backend.store, principal).documents()
    if as_json:
        emit_json([{"doc_id": d.doc_id, "title": d.title} for d in documents])
        return
    for d in documents:
        out.print(f"{shown(d.doc_id)}\t{shown(d.title)}")
    out.print(f"{len(documents)} document(s) readable by {shown(principal.user)}")
