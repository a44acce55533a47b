"""Who may read each document, from its source (issue 43.2): front matter, a folder's
`.ragloop-access` file, the ingest option; stored with the document on both backends and
changed by a re-ingest or a sync."""

from __future__ import annotations

from ragloop.kb import KnowledgeBase


def _access(kb: KnowledgeBase) -> dict[str, list[str] | None]:
    return {d.doc_id: d.metadata.get("access") for d in kb.documents()}


def _tree(root):
    (root / "hr").mkdir(parents=True)
    (root / "hr" / "deep").mkdir()
    (root / "pub").mkdir()
    (root / "hr" / ".ragloop-access").write_text("# HR only\nhr, Managers\n", encoding="utf-8")
    (root / "hr" / "pay.md").write_text("# Pay\n\nSalary bands.\n", encoding="utf-8")
    (root / "hr" / "deep" / "review.md").write_text("# Review\n\nReviews.\n", encoding="utf-8")
    (root / "hr" / "open.md").write_text("---\naccess: everyone\n---\n# Open\n\nHolidays.\n",
                                         encoding="utf-8")
    (root / "pub" / "jane.md").write_text("---\naccess: [jane]\n---\n# Jane\n\nNotes.\n",
                                          encoding="utf-8")
    (root / "pub" / "hello.md").write_text("# Hello\n\nWelcome.\n", encoding="utf-8")
    return root


def test_access_comes_from_the_source_and_is_stored(location, embedder, tmp_path):
    docs = _tree(tmp_path / "docs")
    with KnowledgeBase.open(location, embedder=embedder) as kb:
        report = kb.sync(docs)
        assert report.added == 5, report.failed
        assert _access(kb) == {"hr/pay.md": ["hr", "managers"],
                               "hr/deep/review.md": ["hr", "managers"],  # the folder's above
                               "hr/open.md": None,  # its own word beats the folder's
                               "pub/jane.md": ["jane"], "pub/hello.md": None}
    # stored: a new process reads the same
    with KnowledgeBase.open(location, embedder=embedder) as kb:
        assert _access(kb)["pub/jane.md"] == ["jane"]


def test_a_changed_access_file_or_option_takes_effect_on_sync(embedder, tmp_path):
    docs = _tree(tmp_path / "docs")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        kb.sync(docs)
        (docs / "hr" / ".ragloop-access").write_text("payroll\n", encoding="utf-8")
        report = kb.sync(docs)
        assert sorted(d for d, change in report.changes if change == "updated") == [
            "hr/deep/review.md", "hr/pay.md"]
        assert _access(kb)["hr/pay.md"] == ["payroll"]
        # the option applies where the source says nothing
        kb.sync(docs, access=["staff"])
        got = _access(kb)
        assert got["pub/hello.md"] == ["staff"] and got["pub/jane.md"] == ["jane"]
        assert got["hr/pay.md"] == ["payroll"]
        # an access file naming nobody leaves its documents to admins
        (docs / "hr" / ".ragloop-access").write_text("# nobody yet\n", encoding="utf-8")
        kb.sync(docs)
        assert _access(kb)["hr/pay.md"] == []


def test_a_bad_access_value_refuses_the_document(embedder, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bad.md").write_text("---\naccess: [hr team!]\n---\n# Bad\n\nSecret.\n",
                                 encoding="utf-8")
    (docs / "ok.md").write_text("# Ok\n\nFine.\n", encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([docs])
        assert [d.doc_id for d in kb.documents()] == ["ok.md"]  # not opened to everyone
        assert len(report.failed) == 1 and "access" in report.failed[0][1]


def test_an_empty_access_in_front_matter_means_admins_only(embedder, tmp_path):
    """`access: []` (or `access:` left empty) names nobody, like an access file naming nobody;
    metadata cleaning used to drop it, which opened the document to everyone."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "none.md").write_text("---\naccess: []\n---\n# None\n\nSecret.\n", encoding="utf-8")
    (docs / "blank.md").write_text("---\naccess:\n---\n# Blank\n\nSecret.\n", encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.sync(docs, access=["staff"])  # the source's own word beats the option
        assert report.added == 2, report.failed
        assert _access(kb) == {"none.md": [], "blank.md": []}
