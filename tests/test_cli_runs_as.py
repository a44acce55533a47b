"""`ragloop runs --as USER` (issue 43.4: the CLI's `--as` for admins testing), as `ask`, `chat`
and `mcp` take it: the runs USER's key would list, a run of another user read as a missing
one, an unknown user an error; without `--as`, every run (the CLI is an admin)."""

from __future__ import annotations

import json

from test_access_principals import ragloop

from ragloop.agent.engine import Engine
from ragloop.kb import KnowledgeBase


def test_runs_as_a_user_lists_and_shows_only_that_users_runs(tmp_path, embedder):
    (tmp_path / "a.md").write_text("# Battery\n\n## Life\nThe battery lasts three years.\n",
                                   encoding="utf-8")
    where = str(tmp_path / "kb")
    with KnowledgeBase.open(where, embedder=embedder) as kb:
        kb.ingest([tmp_path / "a.md"])
        people = kb.backend.principals
        people.add_user("alice")
        people.add_user("bob")
        settings = kb.settings.with_(model="offline", kb=where)
        alice = people.principal_of("alice")
        run_id = Engine(kb, settings, principal=alice).ask(
            "How long does the battery last?").run_id

    def runs(*args: str):
        return ragloop("runs", *args, "--kb", where)

    listed = {who: runs("--json", "--as", who) for who in ("alice", "bob")}
    assert all(r.returncode == 0 for r in listed.values()), listed
    assert [r["run_id"] for r in json.loads(listed["alice"].stdout)] == [run_id]
    assert json.loads(listed["bob"].stdout) == []
    assert run_id in {r["run_id"] for r in json.loads(runs("--json").stdout)}
    shown = runs(run_id, "--json", "--as", "alice")
    assert shown.returncode == 0 and json.loads(shown.stdout)["run_id"] == run_id
    theirs, missing = runs(run_id, "--as", "bob"), runs("0" * 32, "--as", "bob")
    assert theirs.returncode == missing.returncode != 0
    assert theirs.stderr.replace(run_id, "X") == missing.stderr.replace("0" * 32, "X")
    nobody = runs("--as", "nobody")
    assert nobody.returncode != 0 and "nobody" in nobody.stderr
