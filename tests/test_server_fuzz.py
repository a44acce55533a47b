"""schemathesis against the real app's /openapi.json, served by uvicorn on loopback: every
operation, with data that fits the schema and data that does not; no answer may be a 5xx.

Bounded (MAX_EXAMPLES per operation and mode, derandomized) so that it stays well under a
minute; RAGLOOP_FUZZ_EXAMPLES raises the bound for a longer local run.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from test_server import serving

MAX_EXAMPLES = int(os.environ.get("RAGLOOP_FUZZ_EXAMPLES", "40"))


def test_no_operation_answers_a_server_error(small_kb, capsys) -> None:
    requests = pytest.importorskip("requests")
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.generation import GenerationMode

    tried: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    with serving(small_kb) as live, requests.Session() as session:
        schema = schemathesis.openapi.from_url(live.url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 10
        settings_ = settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )

        def check(operation, case) -> None:
            response = case.call(base_url=live.url, session=session, timeout=60)
            tried[operation.label] += 1
            statuses[response.status_code] += 1
            if response.status_code >= 500 or (
                response.status_code >= 400 and '"error"' not in response.text
            ):
                failures.append(
                    f"{operation.label} -> {response.status_code}:"
                    f" {response.text[:300]}\n  {case.as_curl_command()}"
                )

        def explore(operation, mode) -> None:
            @settings_
            @given(case=operation.as_strategy(generation_mode=mode))
            def examples(case) -> None:
                check(operation, case)

            try:
                examples()
            except Unsatisfiable:  # nothing to make invalid (an operation without parameters)
                assert mode == GenerationMode.NEGATIVE, operation.label

        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                explore(operation, mode)
    with capsys.disabled():
        print(
            f"\nschemathesis: {len(tried)} operations, {sum(tried.values())} requests,"
            f" statuses {dict(sorted(statuses.items()))}, failures: {len(failures)}"
        )
    assert not failures, "\n".join(failures[:10])


UPLOAD_EXAMPLES = int(os.environ.get("RAGLOOP_FUZZ_UPLOADS", "60"))


def test_random_uploads_never_fail_and_leave_no_stray_file(small_kb, capsys) -> None:
    """Random names (with a supported suffix) and random bytes through POST /documents: a
    clear 2xx/4xx every time, and uploads/ holds only files the knowledge base took."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ragloop.ingest.readers import SUPPORTED_SUFFIXES

    folder = small_kb.store.folder / "uploads"
    statuses: Counter[int] = Counter()
    texts = st.text(st.characters(codec="utf-8"), max_size=300).map(str.encode)
    contents = st.one_of(
        st.binary(max_size=300),
        texts,
        st.builds(lambda t: b"# T\n\n## S\n" + t, texts),
        st.builds(
            lambda i, t: (json.dumps({"_id": i, "text": t}) + "\n").encode(),
            st.sampled_from(["products/sensor.md", "x", "y/z"]),
            st.text(max_size=80),
        ),
    )
    names = st.tuples(
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30),
        st.sampled_from(sorted(SUPPORTED_SUFFIXES)),
    ).map("".join)

    def snapshot() -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}

    with serving(small_kb) as live, live.client() as c:

        @settings(
            max_examples=UPLOAD_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            files=st.lists(st.tuples(names, contents), min_size=1, max_size=3),
            overwrite=st.booleans(),
        )
        def upload(files, overwrite) -> None:
            before = snapshot()
            r = c.post(
                "/documents",
                params={"overwrite": str(overwrite).lower()},
                files=[
                    (
                        "files",
                        (
                            n.encode("utf-8", "surrogateescape").decode("latin-1"),
                            d,
                            "application/octet-stream",
                        ),
                    )
                    for n, d in files
                ],
            )
            statuses[r.status_code] += 1
            assert r.status_code in (200, 400, 409, 413, 415, 422), r.text
            assert r.json().get("error") or r.status_code == 200, r.text
            # every file this request left (new or changed) is the source of a document
            sources = [d.source for d in small_kb.documents()]
            stray = [
                p.name
                for p, data in snapshot().items()
                if before.get(p) != data
                and not any(s == str(p) or s.startswith(f"{p}#") for s in sources)
            ]
            assert not stray, (stray, r.text)

        upload()
    with capsys.disabled():
        print(
            f"\nrandom uploads: {sum(statuses.values())} requests,"
            f" statuses {dict(sorted(statuses.items()))}, failures: 0"
        )
