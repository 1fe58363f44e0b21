"""aiohttp imported without waiting for the CA certificates of its default TLS contexts
(cfkit.backends.aiohttp_import): a plain-HTTP run sends its first request without reading them, an https
endpoint still verifies its server with them, and the contexts are whole again moments after the first attempt.

Each case runs in a child process: the set-aside only happens at aiohttp's first import in a process."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.workspace import REPO

#: CA certificates the system's default store holds (what aiohttp's verifying context reads at import).
SYSTEM_CAS = ssl.create_default_context().cert_store_stats()["x509_ca"]
needs_system_cas = pytest.mark.skipif(SYSTEM_CAS == 0, reason="this system has no CA certificates to read")

PRELUDE = """
import asyncio, json, ssl, sys, threading
def cas(context):
    return context.cert_store_stats()["x509_ca"]
def wait_for_loader():
    for thread in threading.enumerate():
        if thread.name == "cfkit-load-certificates":
            thread.join()
"""


def _child(code: str, *, env_path: Path | None = None) -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(env_path or ""), str(REPO), str(REPO / "tests")) if p)
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_system_cas
def test_a_plain_http_client_sends_before_reading_certificates_and_they_are_read_after_its_first_attempt():
    found = _child("""
from support.chat_api_server import ChatServer
from cfkit.backends.http import JSONClient
with ChatServer() as server:
    client = JSONClient(server.url, {}, deadline=10)
    from cfkit.backends.aiohttp_import import aiohttp
    connector = aiohttp().connector  # the import the client's first attempt would make
    verified, unverified = connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED
    before = [cas(verified), cas(unverified)]
    async def one():
        try:
            return await client.post("/chat/completions", b'{"model": "test-model", "messages": []}')
        finally:
            await client.aclose()
    exchange = asyncio.run(one())
    wait_for_loader()
print(json.dumps({"status": exchange.status, "before": before, "after": [cas(verified), cas(unverified)],
                  "fresh": cas(ssl.create_default_context())}))
""")
    assert found["status"] == 200
    assert found["before"] == [0, 0]  # set aside: the import read none
    # read afterwards into the same contexts, as the import would have read them
    assert found["after"] == [found["fresh"], found["fresh"]] and found["fresh"] > 0


@needs_system_cas
def test_an_https_client_reads_the_certificates_before_it_connects():
    found = _child("""
from cfkit.backends.http import JSONClient
client = JSONClient("https://127.0.0.1:9/v1", {}, deadline=10)
async def session():
    client._session_for_this_loop()
    import aiohttp.connector as connector
    state = [cas(connector._SSL_CONTEXT_VERIFIED), [t.name for t in threading.enumerate()]]
    await client.aclose()
    return state
verified, threads = asyncio.run(session())
print(json.dumps({"verified": verified, "fresh": cas(ssl.create_default_context()), "threads": threads}))
""")
    assert found["verified"] == found["fresh"] > 0
    assert "cfkit-load-certificates" not in found["threads"]  # read at once, not left to a thread


@needs_system_cas
def test_a_client_through_a_proxy_reads_them_before_it_connects_too():
    found = _child("""
import os
os.environ["HTTPS_PROXY"] = os.environ["HTTP_PROXY"] = "http://127.0.0.1:9"
from cfkit.backends.http import JSONClient
client = JSONClient("http://example.org/v1", {}, deadline=10)
async def session():
    client._session_for_this_loop()
    import aiohttp.connector as connector
    await client.aclose()
    return cas(connector._SSL_CONTEXT_VERIFIED)
print(json.dumps({"verified": asyncio.run(session()), "fresh": cas(ssl.create_default_context())}))
""")
    assert found["verified"] == found["fresh"] > 0


@needs_system_cas
def test_only_contexts_built_by_the_import_on_its_own_thread_are_set_aside(tmp_path):
    # A stand-in aiohttp whose import builds one default context itself and one on another thread meanwhile:
    # the other thread's is read as usual; the method is the standard library's again once the import is over.
    (tmp_path / "aiohttp.py").write_text(
        "import ssl, threading\n"
        "own = ssl.create_default_context()\n"
        "others = []\n"
        "thread = threading.Thread(target=lambda: others.append(ssl.create_default_context()))\n"
        "thread.start(); thread.join()\n"
        "other = others[0]\n")
    found = _child("""
from cfkit.backends.aiohttp_import import aiohttp, load_certificates
module = aiohttp()
state = {"own": cas(module.own), "other": cas(module.other),
         "restored": "set_default_verify_paths" not in ssl.SSLContext.__dict__}
load_certificates()
state["own after"] = cas(module.own)
print(json.dumps(state))
""", env_path=tmp_path)
    assert found == {"own": 0, "other": SYSTEM_CAS, "restored": True, "own after": SYSTEM_CAS}


def test_a_failed_import_is_raised_and_sets_nothing_aside(tmp_path):
    (tmp_path / "aiohttp.py").write_text("import ssl\nssl.create_default_context()\n"
                                         "raise ImportError('broken aiohttp for the test')\n")
    found = _child("""
from cfkit.backends import aiohttp_import
try:
    aiohttp_import.aiohttp()
except ImportError as exc:
    raised = str(exc)
print(json.dumps({"raised": raised, "restored": "set_default_verify_paths" not in ssl.SSLContext.__dict__,
                  "waiting": len(aiohttp_import._pending)}))
""", env_path=tmp_path)
    assert found == {"raised": "broken aiohttp for the test", "restored": True, "waiting": 0}


def test_cfkit_imports_aiohttp_only_through_the_module_that_sets_certificates_aside():
    # Whichever import comes first in a process decides whether the certificates wait, so there is one way in.
    package = REPO / "cfkit"
    direct = sorted(str(path.relative_to(REPO)) for path in package.rglob("*.py")
                    if path.name != "aiohttp_import.py"
                    and any(line.strip().startswith(("import aiohttp", "from aiohttp"))
                            for line in path.read_text(encoding="utf-8").splitlines()))
    assert direct == []
