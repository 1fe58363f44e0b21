"""``probe run`` says the attempts given up after they were sent (a provider may bill them) also without prices,
and a run its backend stopped says them in its stop line and its stored cost, priced or not.

Before, a run without prices said nothing of them (its summary's cost part was left out whole), and a stop line
said them only for a priced run that had sent something. A real CLI, a real loopback server, a real store.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import many_cases
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

THROWN_AWAY = Scripted(body=[])  # a 200 whose body is no completion: read, thrown away, retried
PRICED = ("-o", "price_in=1000", "-o", "price_out=1000")


def _run(ws, script, *extra: str):
    with ChatServer(script) as server:
        return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, "-j", "1", "-o", "backoff=0.01", "-o", "max_retries=1", *extra])


def _cost(ws) -> str:
    (listed,) = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    return listed["cost"]["shown"]


def test_a_run_without_prices_says_its_abandoned_attempts(tmp_path):
    ws = many_cases(tmp_path / "ws", 2)
    ran = _run(ws, lambda body, n: THROWN_AWAY)
    assert ran.exit_code == 1, ran.output
    said = "no prices known; 4 abandoned attempts may be billed"
    assert f"2 sent (2 failed, {said});" in " ".join(ran.stderr.split()), ran.stderr
    assert _cost(ws) == said  # as the stored run says it


@pytest.mark.parametrize(("extra", "said", "stored"), [
    ((), "(Before it stopped: no prices known; 1 abandoned attempt may be billed.)",
     "no prices known; 1 abandoned attempt may be billed"),
    (PRICED, "(This invocation spent $0.00 before it stopped; 1 abandoned attempt may be billed on top (no priced "
             "reply to estimate them by).)",
     "$0.00; 1 abandoned attempt may be billed on top (no priced reply to estimate them by)"),
], ids=["unpriced", "priced"])
def test_a_run_its_backend_stopped_says_its_abandoned_attempts(tmp_path, extra, said, stored):
    ws = many_cases(tmp_path / "ws", 1)
    ran = _run(ws, lambda body, n: THROWN_AWAY if n == 1 else Scripted(401, error_body("bad key")), *extra)
    assert ran.exit_code == 2, ran.output
    assert said in " ".join(ran.stderr.split()), ran.stderr
    assert _cost(ws) == stored
