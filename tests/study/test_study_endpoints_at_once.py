"""A study's endpoints are reached all at once: one that does not answer holds a check for its time limit, not
the limit once per endpoint.

Before, ``study validate``, ``study run`` and ``study status`` asked each endpoint for its models in turn, so a
study of eight servers behind a firewall that drops packets waited 8 × 5 s before saying a word.
"""

from __future__ import annotations

import time

import pytest

from cfkit.study import load_study
from cfkit.study.check import check_endpoints
from support.hostile_http_server import HostileServer, silent

pytestmark = pytest.mark.timeout(120)

LIMIT_S = 2.0  # the check's time limit for each endpoint here (5 s in use)


def test_endpoints_that_do_not_answer_are_waited_for_together(tmp_path):
    arrived: list[float] = []

    def hold(body: bytes):
        arrived.append(time.monotonic())
        return silent

    with HostileServer(hold) as a, HostileServer(hold) as b, HostileServer(hold) as c:
        path = tmp_path / "study.toml"
        path.write_text("".join(f"[models.m{i}]\nmodel = 'openai:model-{i}'\nendpoint = '{s.url}'\n"
                                for i, s in enumerate((a, b, c))) + "[suites.contextcanvas]\n")
        study = load_study(path)
        checked = check_endpoints(study, timeout=LIMIT_S)
    assert len(arrived) == 3
    # Each endpoint was asked before the first one's time ran out (in turn, they come LIMIT_S apart).
    assert max(arrived) - min(arrived) < LIMIT_S / 2, arrived
    assert list(checked.endpoints) == [a.url, b.url, c.url]  # in the study's order, each with why
    for url in (a.url, b.url, c.url):
        assert checked.endpoints[url].startswith(f"{url} did not answer within {LIMIT_S:g} s (timed out)")
        assert checked.answers[url] is None
