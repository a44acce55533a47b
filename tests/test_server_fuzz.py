"""schemathesis against the real app's /openapi.json, served by uvicorn on loopback: every
operation, with data that fits the schema and data that does not; no answer may be a 5xx.

Bounded (MAX_EXAMPLES per operation and mode, derandomized) so that it stays well under a
minute; RAGLOOP_FUZZ_EXAMPLES raises the bound for a longer local run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from test_server import serving

MAX_EXAMPLES = int(os.environ.get("RAGLOOP_FUZZ_EXAMPLES", "25"))


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
