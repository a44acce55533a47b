"""Fuzzing the readers, file names and the query path (issue 18): random bytes, encodings and
names. A reader may only answer with documents of valid text or a ReaderError; an ingest
reports a bad file and goes on; a search returns hits or a UserError. Deterministic
(derandomize) and bounded: a few seconds in `make test`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_kit import DOCS, assert_consistent, open_kb, write_files

from ragloop.core.errors import ReaderError, UserError
from ragloop.core.unicode import is_text
from ragloop.ingest.chunking import chunk_document
from ragloop.ingest.readers import SUPPORTED_SUFFIXES, read_file

FUZZ = settings(
    derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
TRIED = {"reader inputs": 0, "file names": 0, "queries": 0}

ENCODINGS = ["utf-8", "utf-16", "utf-32", "latin-1", "cp1252", "shift_jis", "koi8-r"]
MARKUP = [
    "<h1>",
    "</h1>",
    "<h2>",
    "<p>",
    "</p>",
    "<div>",
    "</div>",
    "<script>",
    "<pre>",
    "<table><tr><td>",
    "<!--",
    "-->",
    "<title>",
    "# ",
    "## ",
    "```",
    "\n",
    "\n\n",
    "- ",
    "| a | b |",
    '{"_id": "x", "text": "',
    '"}',
    "\ud83d",
    "\x00",
    "%PDF-1.4",
    "word ",
    "naïve ",
    "中文 ",
    "<h1>unclosed ",
    "&amp;",
    "&#xD800;",
]

texts = st.text(st.characters(codec=None, categories=None), max_size=300)
soup = st.lists(st.one_of(st.sampled_from(MARKUP), texts), max_size=40).map("".join)


@st.composite
def file_bytes(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "encoded", "soup"]))
    if kind == "bytes":
        return draw(st.binary(max_size=2000))
    text = draw(soup if kind == "soup" else texts)
    encoding = draw(st.sampled_from(ENCODINGS))
    # lone surrogates go through as the bytes a broken encoder writes for them
    return text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "replace")


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@given(data=file_bytes(), suffix=st.sampled_from(sorted(SUPPORTED_SUFFIXES)))
@settings(FUZZ, max_examples=400)
def test_readers_return_valid_documents_or_a_reader_error(fuzz_dir, data, suffix) -> None:
    TRIED["reader inputs"] += 1
    path = fuzz_dir / f"f{suffix}"
    path.write_bytes(data)
    try:
        docs = read_file(path, "f")
    except ReaderError:
        return
    for doc in docs:
        strings = [doc.doc_id, doc.title, *(s.text for s in doc.sections)]
        assert all(isinstance(x, str) for x in strings)
        for chunk in chunk_document(doc, 64, 16):
            assert chunk.text.strip()
        assert all(is_text(x) for x in strings)


names = st.one_of(
    st.binary(min_size=1, max_size=60).map(lambda b: b.replace(b"/", b"_").replace(b"\x00", b"")),
    st.text(min_size=1, max_size=60).map(
        lambda t: t.replace("/", "_").replace("\x00", "").encode("utf-8")
    ),
)


@pytest.fixture(scope="module")
def fuzz_kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzkb")
    docs = write_files(root / "docs", DOCS)
    kb = open_kb(root / "kb")
    kb.ingest([docs])
    yield kb
    kb.close()


@given(
    raw=st.lists(names, min_size=1, max_size=3, unique=True),
    suffix=st.sampled_from([b".md", b".txt", b".html", b""]),
)
@settings(FUZZ, max_examples=60)
def test_any_file_name_is_ingested_or_skipped_with_a_reason(fuzz_kb, fuzz_dir, raw, suffix) -> None:
    folder = fuzz_dir / "names"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    made = 0
    for i, name in enumerate(raw):
        fname = (name[:200] or b"x") + suffix
        if fname in (b".", b"..") or fname.startswith(b"."):
            continue
        try:
            with open(os.path.join(os.fsencode(folder), fname), "wb") as f:
                f.write(f"# Fuzz {i}\n\nFile number {i} of a fuzzed folder.\n".encode())
        except OSError:  # a name the file system refuses
            continue
        made += 1
        TRIED["file names"] += 1
    report = fuzz_kb.ingest([folder])
    assert (
        report.added
        + report.updated
        + report.unchanged
        + len(report.failed)
        + len(report.unsupported)
        == made
    )
    for path, reason in report.failed:
        assert is_text(path) and is_text(reason)


queries = st.one_of(
    texts,
    soup,
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.lists(
        st.sampled_from(
            [
                "(",
                ")",
                '"',
                "*",
                "~",
                "^",
                ":",
                "AND",
                "OR",
                "NOT",
                " ",
                "+",
                "-",
                "\\",
                "zanzibar",
                "[",
                "]",
                "{",
                "}",
                "/",
            ]
        ),
        max_size=40,
    ).map("".join),
)


@given(
    query=queries,
    mode=st.sampled_from(["bm25", "vector", "hybrid"]),
    k=st.integers(min_value=1, max_value=60),
)
@settings(FUZZ, max_examples=300)
def test_any_query_returns_hits_or_a_user_error(fuzz_kb, query, mode, k) -> None:
    TRIED["queries"] += 1
    try:
        hits = fuzz_kb.search(query, k=k, mode=mode)
    except UserError:
        return
    assert len(hits) <= k


def test_the_fuzzed_kb_is_consistent_and_counts(fuzz_kb) -> None:
    assert_consistent(fuzz_kb)
    print(f"\nfuzz inputs tried: {TRIED}")  # the figures RELIABILITY.md quotes
