"""The one endpoint policy (cfkit.endpoints): base URL, key, plain http, credentials in the URL.

The rules are checked on the policy function itself with an explicit
environment, then end to end: `cfkit probe run` against a real Chat
Completions server on 127.0.0.1 (tests/support/chat_api_server.py).
"""

from __future__ import annotations

import base64
import json

import pytest

from cfkit.endpoints import OFFICIAL_URL, base_url_problem, is_loopback, redact_url, resolve_endpoint
from cfkit.errors import OptionError
from support.chat_api_server import ChatServer
from support.workspace import run_cli, tree_snapshot

OFFICIAL_SECRET = "sk-official-DO-NOT-LEAK-5f1e2d3c4b5a6978"
SERVER_SECRET = "server-key-DO-NOT-LEAK-77"
PASSWORD = "pw-DO-NOT-LEAK-31337"


def one_line(text: str) -> bool:
    """Exactly one line, and no blank one (the backend is built before any progress bar is drawn)."""
    return len(text.splitlines()) == 1 and text.strip() != ""


def resolve(base_url=None, api_key_env=None, **environ):
    return resolve_endpoint(base_url, api_key_env, who="test", url_flag="--base-url", key_flag="--api-key-env",
                            environ=environ)


# ── the policy ────────────────────────────────────────────────────────────


def test_default_is_the_official_api_with_the_official_key():
    endpoint = resolve(OPENAI_API_KEY=OFFICIAL_SECRET)
    assert endpoint.url == endpoint.shown == OFFICIAL_URL and endpoint.official
    assert endpoint.authorization == f"Bearer {OFFICIAL_SECRET}" and endpoint.notes == ()
    assert OFFICIAL_SECRET not in repr(endpoint)  # a stray log line cannot show it


def test_official_api_without_a_key_is_reported_not_raised():
    endpoint = resolve()
    assert endpoint.key is None
    assert endpoint.key_problem.startswith("$OPENAI_API_KEY is not set; export your key in it or name another")


def test_base_url_option_wins_over_the_environment_which_wins_over_the_default():
    assert resolve("http://127.0.0.1:1/v1", OPENAI_BASE_URL="http://127.0.0.1:2/v1").url == "http://127.0.0.1:1/v1"
    assert resolve(OPENAI_BASE_URL="http://127.0.0.1:2/v1/").url == "http://127.0.0.1:2/v1"
    assert resolve(OPENAI_BASE_URL="").url == OFFICIAL_URL  # an empty variable counts as unset


def test_a_custom_server_never_gets_the_official_key_and_a_note_says_so():
    endpoint = resolve("http://127.0.0.1:8000/v1", OPENAI_API_KEY=OFFICIAL_SECRET)
    assert not endpoint.official and endpoint.key is None
    assert endpoint.authorization == "Bearer cfkit-no-key"
    (note,) = endpoint.notes
    assert note == ("$OPENAI_API_KEY was not sent to http://127.0.0.1:8000/v1: it goes only to "
                    "https://api.openai.com/v1; name the variable holding this server's key with --api-key-env")
    # Nothing to withhold, nothing to say.
    assert resolve("http://127.0.0.1:8000/v1").notes == ()


def test_a_custom_server_gets_the_key_its_variable_names():
    endpoint = resolve("https://llm.example.org/v1", "SERVER_KEY", SERVER_KEY=SERVER_SECRET,
                       OPENAI_API_KEY=OFFICIAL_SECRET)
    assert endpoint.authorization == f"Bearer {SERVER_SECRET}" and endpoint.notes == ()
    assert resolve("https://llm.example.org/v1", "SERVER_KEY").key_problem.startswith("$SERVER_KEY is not set")


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000/v1", "http://gpu-node.lan/v1", "http://[fe80::1]/v1"])
def test_no_key_travels_over_plain_http_except_to_loopback(url):
    with pytest.raises(OptionError, match=r"refusing to send the key in \$SERVER_KEY over plain http to "):
        resolve(url, "SERVER_KEY", SERVER_KEY=SERVER_SECRET)
    with pytest.raises(OptionError, match="refusing to send the credentials in the URL over plain http"):
        resolve(url.replace("http://", f"http://alice:{PASSWORD}@"))
    # Without a key there is nothing to protect: the placeholder goes.
    assert resolve(url).authorization == "Bearer cfkit-no-key"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://127.9.9.9/v1", "http://[::1]:8000/v1",
                                 "http://localhost:11434/v1", "http://LOCALHOST/v1"])
def test_loopback_may_take_a_key_over_plain_http(url):
    assert resolve(url, "SERVER_KEY", SERVER_KEY=SERVER_SECRET).key == SERVER_SECRET


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.0.0.1") and not is_loopback("localhost.example.com") and not is_loopback("0.0.0.0")


def test_the_official_host_over_plain_http_is_refused():
    with pytest.raises(OptionError, match="the official API is reached over https only; write https://api.openai.com/v1"):
        resolve("http://api.openai.com/v1", OPENAI_API_KEY=OFFICIAL_SECRET)


def test_credentials_in_the_url_become_basic_auth_and_are_redacted():
    endpoint = resolve(f"https://alice:{PASSWORD}@llm.example.org/v1/")
    assert endpoint.url == "https://llm.example.org/v1"
    assert endpoint.shown == "https://***@llm.example.org/v1"
    assert endpoint.authorization == "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert PASSWORD not in repr(endpoint)
    with pytest.raises(OptionError, match="carries credentials in the URL and \\$SERVER_KEY holds a key; keep one"):
        resolve(f"https://alice:{PASSWORD}@llm.example.org/v1", "SERVER_KEY", SERVER_KEY=SERVER_SECRET)


def test_redact_url():
    assert redact_url("http://u:p@h:1/v1") == "http://***@h:1/v1"
    assert redact_url("http://token@h/v1") == "http://***@h/v1"
    assert redact_url("http://h/v1") == "http://h/v1"
    assert redact_url("http://u:p@[::1/v1") == "http://***@[::1/v1"  # even a URL that does not parse


@pytest.mark.parametrize("value, problem", [
    ("http://example.com\t/v1", "contains a tab (U+0009)"),
    ("http://example.com/v1\n", "whitespace or a control character (U+000A)"),
    ("http://[::1/v1", "is not a valid URL (Invalid IPv6 URL)"),
    ("http://[::1]:99999/v1", "is not a valid URL (Port out of range"),
    ("not a url", "is not a URL; give the server's http:// or https:// address"),
    ("file:///etc/passwd", "is a file:// URL; give the server's http:// or https:// address"),
    ("ftp://example.com/v1", "is a ftp:// URL"),
    ("http:///v1", "has no host"),
    ("http://example.com/v1?key=abc", "has a query or fragment"),
])
def test_bad_base_urls(value, problem):
    assert problem in base_url_problem(value)
    with pytest.raises(OptionError, match="fix --base-url") as info:
        resolve(value)
    assert "\n" not in str(info.value)
    with pytest.raises(OptionError, match="fix or unset \\$OPENAI_BASE_URL"):
        resolve(OPENAI_BASE_URL=value)


def test_good_base_urls():
    for value in ("http://localhost:8000/v1", "https://api.openai.com/v1", "http://[::1]:8000/v1", "https://h"):
        assert base_url_problem(value) is None


def test_a_bad_url_with_credentials_is_refused_without_showing_them():
    with pytest.raises(OptionError) as info:
        resolve(f"http://alice:{PASSWORD}@[::1/v1")
    assert PASSWORD not in str(info.value) and "***@" in str(info.value)


# ── through `cfkit probe run` ─────────────────────────────────────────────


@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:8000\t/v1", "contains a tab"),
    ("http://[::1/v1", "is not a valid URL"),
    ("not a url", "is not a URL"),
    ("file:///tmp/x", "is a file:// URL"),
])
def test_a_bad_base_url_is_one_line_of_bad_input(tiny_ws, url, problem):
    before = tree_snapshot(tiny_ws)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                      "--base-url", url])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: openai backend: base URL") and problem in result.stderr
    assert one_line(result.stderr) and "Traceback" not in result.output
    # The backend is built before the store is opened: not even an empty store appears.
    assert tree_snapshot(tiny_ws) == before and not (tiny_ws / ".cfkit").exists()


def test_a_bad_openai_base_url_variable_is_one_line_of_bad_input(tiny_ws):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas"],
                     env={"OPENAI_BASE_URL": "http://[::1/v1"})
    assert result.exit_code == 2 and one_line(result.stderr)
    assert "$OPENAI_BASE_URL 'http://[::1/v1' is not a valid URL" in result.stderr


def test_a_key_for_plain_http_to_another_host_is_refused_before_anything_is_sent(tiny_ws):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                      "--base-url", "http://10.1.2.3:8000/v1", "--api-key-env", "SERVER_KEY"],
                     env={"SERVER_KEY": SERVER_SECRET})
    assert result.exit_code == 2 and one_line(result.stderr)
    assert "refusing to send the key in $SERVER_KEY over plain http to 10.1.2.3" in result.stderr
    assert SERVER_SECRET not in result.output


def test_withheld_official_key_is_noted_with_the_run_and_on_stderr(tiny_ws):
    with ChatServer() as server:
        result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", server.url, "--json"], env={"OPENAI_API_KEY": OFFICIAL_SECRET})
    assert result.exit_code == 0, result.stderr
    assert {h["authorization"] for h in server.headers} == {"Bearer cfkit-no-key"}
    note = f"$OPENAI_API_KEY was not sent to {server.url}"
    # Said once, at the start, before anything was sent (the first line of stderr), not again at the end.
    assert note in result.stderr.splitlines()[0] and result.stderr.count(note) == 1
    run_id = json.loads(result.stdout)["run_id"]
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)
    assert any(n.startswith(note) for n in shown["run"]["notes"]["backend_notes"])


def test_credentials_in_the_base_url_are_sent_as_basic_auth_and_stored_nowhere(tiny_ws):
    with ChatServer() as server:
        url = server.url.replace("http://", f"http://alice:{PASSWORD}@")
        result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", url, "--json"])
        assert result.exit_code == 0, result.stderr
    expected = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert {h["authorization"] for h in server.headers} == {expected}
    run_id = json.loads(result.stdout)["run_id"]
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"])
    listed = run_cli(["-w", str(tiny_ws), "runs", "list", "--json"])
    shown_text = run_cli(["-w", str(tiny_ws), "runs", "show", run_id])
    blobs = [result.stdout, result.stderr, shown.stdout, listed.stdout, shown_text.stdout]
    blobs += [p.read_bytes().decode("latin-1") for p in (tiny_ws / ".cfkit").glob("cfkit.db*")]
    assert not any(PASSWORD in blob for blob in blobs)
    assert json.loads(shown.stdout)["run"]["options"]["options"]["base_url"] == server.url.replace(
        "http://", "http://***@")
