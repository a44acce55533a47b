"""Users, groups and API keys (issue 43.1): kept hashed in the knowledge base's own storage
(SQLite and Postgres), managed from the CLI, and read by the server's guard per request."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_server import LiveServer, offline_settings

from ragloop.core.access import Principal, hash_key
from ragloop.core.errors import NotFoundError, UserError


def ragloop(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_users_and_keys_on_both_stores(location, embedder, tmp_path):
    from ragloop.kb import KnowledgeBase

    (tmp_path / "a.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    with KnowledgeBase.open(location, embedder=embedder) as kb:
        kb.ingest([tmp_path / "a.md"])
        people = kb.backend.principals
        assert not people.has_keys()
        assert people.add_user("Jane", ["HR", "managers"]) == "jane"
        people.add_user("bob")
        key_id, token = people.add_key("jane", "laptop")
        assert token.startswith(f"rlk_{key_id}_") and len(token) > 40
        assert people.has_keys()
        assert people.principal(token) == Principal("jane", frozenset({"hr", "managers"}))
        assert people.principal(token + "x") is None and people.principal("") is None
        with pytest.raises(NotFoundError):
            people.add_key("nobody")
        with pytest.raises(UserError):
            people.add_user("everyone")
        with pytest.raises(UserError):
            people.add_user("bad name")
        listed = {u["name"]: u for u in people.users()}
        assert listed["jane"]["keys"] == 1 and listed["bob"]["keys"] == 0
        assert [k["key_id"] for k in people.api_keys()] == [key_id]
        # only the hash is stored: the token is nowhere in the record
        assert hash_key(token) != token
        assert token not in repr(people.api_keys())
        # a second key, then revoking one leaves the other working
        _, other = people.add_key("jane")
        assert people.revoke_key(key_id) and not people.revoke_key(key_id)
        assert people.principal(token) is None and people.principal(other).user == "jane"
        # removing a user takes its keys with it
        assert people.remove_user("jane") and not people.remove_user("jane")
        assert people.principal(other) is None and not people.has_keys()
    if not location.startswith("postgres"):
        raw = (tmp_path / "kb" / "ragloop.db").read_bytes()
        assert token.encode() not in raw and other.encode() not in raw


def test_cli_adds_lists_and_revokes(small_kb):
    kb = str(small_kb.store.folder)
    small_kb.close()
    made = ragloop("users", "add", "jane", "--group", "hr", "--kb", kb)
    assert made.returncode == 0, made.stderr
    key = ragloop("keys", "add", "jane", "--label", "laptop", "--kb", kb)
    assert key.returncode == 0, key.stderr
    token = key.stdout.strip()
    assert token.startswith("rlk_")
    listed = ragloop("keys", "list", "--kb", kb)
    key_id = token.split("_")[1]
    assert key_id in listed.stdout and "jane" in listed.stdout and token not in listed.stdout
    users = ragloop("users", "list", "--kb", kb)
    assert "jane" in users.stdout and "hr" in users.stdout
    assert ragloop("keys", "revoke", key_id, "--kb", kb).returncode == 0
    again = ragloop("keys", "revoke", key_id, "--kb", kb)
    assert again.returncode != 0 and "No active key" in again.stderr
    assert ragloop("users", "remove", "nobody", "--kb", kb).returncode != 0


def test_server_takes_user_keys_and_the_admin_key(small_kb):
    from ragloop.apps.server.app import create_app

    people = small_kb.backend.principals
    app = create_app(offline_settings(small_kb), kb=small_kb, api_key="admin-s3cret")
    with LiveServer(app) as live, live.client() as c:
        # before any user key: the admin key alone, as today
        assert c.get("/documents").status_code == 401
        assert c.get("/documents", headers={"X-API-Key": "admin-s3cret"}).status_code == 200
        people.add_user("jane")
        _, token = people.add_key("jane")  # made while the server runs: read per request
        assert c.get("/documents", headers={"Authorization": f"Bearer {token}"}
                     ).status_code == 200
        assert c.get("/documents", headers={"X-API-Key": token[:-1]}).status_code == 401
        assert c.get("/healthz").json()["auth_required"] is True


def test_keyless_loopback_stays_open_until_a_user_key_exists(small_kb):
    from ragloop.apps.server.app import create_app

    app = create_app(offline_settings(small_kb), kb=small_kb)
    with LiveServer(app) as live, live.client() as c:
        assert c.get("/documents").status_code == 200
        assert c.get("/healthz").json()["auth_required"] is False
        small_kb.backend.principals.add_user("jane")
        _, token = small_kb.backend.principals.add_key("jane")
        assert c.get("/documents").status_code == 401  # a key exists: one is required
        assert c.get("/documents", headers={"X-API-Key": token}).status_code == 200


def test_bind_beyond_loopback_needs_a_key_or_user_keys():
    from ragloop.apps.server.app import check_bind
    from ragloop.core.errors import ConfigError

    with pytest.raises(ConfigError):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", None, user_keys=True)
    check_bind("127.0.0.1", None)
