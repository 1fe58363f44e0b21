"""aiohttp imported without reading the CA certificates of its default TLS contexts until a TLS connection
needs them (cfkit.backends.aiohttp_import): a plain-HTTP run never reads them, and any TLS connection made
through aiohttp in the process, cfkit's or a plug-in's, finds them read first.

Each case runs in a child process: the set-aside only happens at aiohttp's first import in a process."""

from __future__ import annotations

import ast
import inspect
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
import asyncio, json, socket, ssl, sys, threading
def cas(context):
    return context.cert_store_stats()["x509_ca"]
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
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
def test_a_plain_http_run_sends_and_is_answered_without_reading_certificates():
    found = _child("""
from support.chat_api_server import ChatServer
from cfkit.backends.http import JSONClient
with ChatServer() as server:
    client = JSONClient(server.url, {}, deadline=10)
    async def one():
        try:
            return await client.post("/chat/completions", b'{"model": "test-model", "messages": []}')
        finally:
            await client.aclose()
    exchange = asyncio.run(one())
import aiohttp.connector as connector
print(json.dumps({"status": exchange.status, "read": [cas(connector._SSL_CONTEXT_VERIFIED),
                                                        cas(connector._SSL_CONTEXT_UNVERIFIED)]}))
""")
    assert found == {"status": 200, "read": [0, 0]}


@needs_system_cas
@pytest.mark.parametrize("how", ["cfkit's https client", "a plug-in's own aiohttp session", "through a proxy"])
def test_the_first_tls_connection_reads_the_certificates_before_it_connects(how):
    # Nothing listens on the port (or the proxy's tunnel closes): the connection fails after aiohttp chose its
    # TLS context, which is when the certificates must already be in it, as the import would have left them.
    found = _child("""
how = sys.argv[1] if len(sys.argv) > 1 else %r
port = closed_port()
from cfkit.backends.aiohttp_import import aiohttp
module = aiohttp()
connector = module.connector
before = cas(connector._SSL_CONTEXT_VERIFIED)
async def attempt():
    if how == "cfkit's https client":
        from cfkit.backends.http import JSONClient
        client = JSONClient(f"https://127.0.0.1:{port}/v1", {}, deadline=10)
        exchange = await client.post("/chat/completions", b"{}")
        await client.aclose()
        return exchange.failure
    proxy = None
    if how == "through a proxy":  # a proxy that opens the tunnel, then closes it: TLS starts inside it
        listener = socket.create_server(("127.0.0.1", 0))
        def tunnel():
            conn, _ = listener.accept()
            while b"\\r\\n\\r\\n" not in conn.recv(65536):
                pass
            conn.sendall(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
            conn.close()
        threading.Thread(target=tunnel, daemon=True).start()
        proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    async with module.ClientSession() as session:
        try:
            await session.get(f"https://127.0.0.1:{port}/", proxy=proxy)
        except module.ClientError as exc:
            return type(exc).__name__
failure = asyncio.run(attempt())
print(json.dumps({"before": before, "after": [cas(connector._SSL_CONTEXT_VERIFIED),
                                              cas(connector._SSL_CONTEXT_UNVERIFIED)],
                  "failure": failure}))
""" % how)
    assert found["before"] == 0 and found["failure"]
    assert found["after"] == [SYSTEM_CAS, SYSTEM_CAS]


TLS = REPO / "tests" / "data" / "tls"


def test_an_https_server_trusted_through_ssl_cert_file_is_reached_with_the_certificates_read_first():
    # A real TLS server on loopback whose self-signed certificate the process trusts through SSL_CERT_FILE, which
    # the default contexts read only when their certificates are read: the request is answered only if they
    # were read into aiohttp's verifying context before the handshake.
    found = _child("""
import http.server, os
os.environ["SSL_CERT_FILE"] = %r
class Answer(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        body = b'{"ok": true}'
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(%r, %r)
server.socket = context.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
from cfkit.backends.http import JSONClient
client = JSONClient(f"https://127.0.0.1:{server.server_address[1]}/v1", {}, deadline=10)
async def one():
    try:
        return await client.post("/chat/completions", b"{}")
    finally:
        await client.aclose()
exchange = asyncio.run(one())
server.shutdown()
print(json.dumps({"status": exchange.status, "failure": exchange.failure, "detail": exchange.detail[:200]}))
""" % (str(TLS / "cert.pem"), str(TLS / "cert.pem"), str(TLS / "key.pem")))
    assert found["status"] == 200, found


STAND_IN = (
    "import ssl, threading\n"
    "own = ssl.create_default_context()\n"
    "others = []\n"
    "thread = threading.Thread(target=lambda: others.append(ssl.create_default_context()))\n"
    "thread.start(); thread.join()\n"
    "other = others[0]\n")


@needs_system_cas
def test_only_contexts_built_by_the_import_on_its_own_thread_are_set_aside(tmp_path):
    # A stand-in aiohttp whose import builds one default context itself and one on another thread meanwhile,
    # with a connector that hands its own context out for TLS: the other thread's context is read as usual, the
    # import's own when the connector first hands one out; the method is the standard library's again after.
    (tmp_path / "aiohttp.py").write_text(
        STAND_IN + "class connector:\n    class TCPConnector:\n"
        "        def _get_ssl_context(self, req):\n            return own if req == 'https' else None\n")
    found = _child("""
from cfkit.backends.aiohttp_import import aiohttp
module = aiohttp()
state = {"own": cas(module.own), "other": cas(module.other),
         "restored": "set_default_verify_paths" not in ssl.SSLContext.__dict__}
tcp = module.connector.TCPConnector()
tcp._get_ssl_context("http")
state["after plain http"] = cas(module.own)
tcp._get_ssl_context("https")
state["after tls"] = cas(module.own)
print(json.dumps(state))
""", env_path=tmp_path)
    assert found == {"own": 0, "other": SYSTEM_CAS, "restored": True, "after plain http": 0,
                     "after tls": SYSTEM_CAS}


@needs_system_cas
def test_an_aiohttp_without_that_connector_method_gets_its_certificates_at_once(tmp_path):
    (tmp_path / "aiohttp.py").write_text(STAND_IN)
    found = _child("""
from cfkit.backends.aiohttp_import import aiohttp
print(json.dumps({"own": cas(aiohttp().own)}))
""", env_path=tmp_path)
    assert found == {"own": SYSTEM_CAS}


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


def test_the_installed_aiohttp_hands_its_default_contexts_out_in_one_place_only():
    # What the set-aside rests on: aiohttp's connector module names its two default contexts only where they
    # are built and in TCPConnector._get_ssl_context. An aiohttp that hands them out elsewhere fails this test
    # (and would make TLS there fail to verify until the certificates are read).
    import aiohttp.connector as connector

    tree = ast.parse(inspect.getsource(connector))
    users = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if names & {"_SSL_CONTEXT_VERIFIED", "_SSL_CONTEXT_UNVERIFIED"}:
                users.add(node.name)
    assert users == {"_get_ssl_context"}


def test_cfkit_imports_aiohttp_only_through_the_module_that_sets_certificates_aside():
    # Whichever import comes first in a process decides whether the certificates wait, so there is one way in.
    package = REPO / "cfkit"
    direct = sorted(str(path.relative_to(REPO)) for path in package.rglob("*.py")
                    if path.name != "aiohttp_import.py"
                    and any(line.strip().startswith(("import aiohttp", "from aiohttp"))
                            for line in path.read_text(encoding="utf-8").splitlines()))
    assert direct == []
