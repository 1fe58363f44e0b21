"""A replica set none of whose servers can answer for the model is refused with the fix their answers call for.

Before, every such refusal ended "Start the servers, or give --base-url for servers that serve 'M'", also when
every server was up and refused the key at the start-up check (GET /models answered 401/403: the key is what to
fix, named with the command's option for its variable) or listed its models without 'M' (the model's name is what
to fix)."""

from __future__ import annotations

import pytest

from cfkit.backends.http import JSONClient
from cfkit.backends.replicas import Replica, served_model
from cfkit.errors import BackendUnavailable
from cfkit.option_words import probe_run_words, study_words
from support.chat_api_server import ChatServer, listing
from support.probe_runs import many_cases, replicated

pytestmark = pytest.mark.timeout(120)

SAID = "Incorrect API key provided"  # what the loopback server says with its 401


def _refusal(servers, **words) -> str:
    """The line refusing a replica set of ``servers`` for 'test-model', as the openai backend is refused it."""
    replicas = [Replica(s.url, JSONClient(s.url, {}, deadline=5)) for s in servers]
    with pytest.raises(BackendUnavailable) as refused:
        served_model(replicas, "test-model", who="openai backend", **words)
    return str(refused.value)


@pytest.fixture()
def keyed():
    with ChatServer() as a, ChatServer() as b:
        a.key = b.key = "the-right-key"  # every request without it, GET /models too, is answered 401
        yield a, b


def test_probe_run_over_servers_that_all_refuse_the_key_says_the_key_not_start_the_servers(tmp_path, keyed):
    a, b = keyed
    result = replicated(many_cases(tmp_path / "ws", 3), [a.url, b.url])
    assert result.exit_code == 2, result.output
    (line,) = [s for s in result.stderr.splitlines() if s.startswith("error:")]
    assert line == (f"error: openai backend: every replica ({a.url}, {b.url}) wants a key (HTTP 401: {SAID}), and "
                    "none was sent to them; name the variable holding their key with --api-key-env.")
    assert "Start the servers" not in line
    assert a.count == b.count == 0  # nothing was sent


@pytest.mark.parametrize("sent,said", [
    (False, "wants a key (HTTP 401: {said}), and none was sent to them; name the variable holding their key with "
            "--api-key-env."),
    (True, "refused the key (HTTP 401: {said}). Check the key in its environment variable, or name another "
           "variable with --api-key-env."),
], ids=["no-key-sent", "key-sent"])
def test_every_replica_refusing_the_key_names_probe_runs_option_for_it(keyed, sent, said):
    a, b = keyed
    line = _refusal(keyed, words=probe_run_words("openai"), key_sent=sent)
    assert line == f"openai backend: every replica ({a.url}, {b.url}) " + said.format(said=SAID)


def test_every_replica_refusing_the_key_under_a_study_names_the_study_files_setting(tmp_path, keyed):
    a, b = keyed
    file = tmp_path / "study.toml"
    line = _refusal(keyed, words=study_words(file, "m", "a", named=True, replicas=True), key_sent=True)
    assert line == (f"openai backend: every replica ({a.url}, {b.url}) refused the key (HTTP 401: {SAID}). Check "
                    "the key in its environment variable, or name another variable with api_key_env = \"NAME\" in "
                    f"the [endpoints.NAME] tables its endpoints name of {file}.")


def test_servers_that_all_list_other_models_call_for_the_models_name(tmp_path):
    with ChatServer() as a, ChatServer() as b:
        a.models = b.models = listing("other-model")
        result = replicated(many_cases(tmp_path / "ws", 3), [a.url, b.url])
    why = "it serves other-model, not 'test-model'; did you mean 'other-model'?"
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: openai backend: no replica can answer for 'test-model' ({a.url}: {why}; {b.url}: {why}). Nothing "
        "was sent. Fix the model's name, or give --base-url for servers that serve 'test-model'.")


def test_a_set_of_mixed_refusals_names_each_fix_it_calls_for(keyed):
    a, keyed_b = keyed
    with ChatServer() as other:
        other.models = listing("other-model")
        line = _refusal([a, other], words=probe_run_words("openai"), key_sent=True)
    assert line == (f"openai backend: no replica can answer for 'test-model' ({a.url}: it did not answer GET "
                    f"/models: HTTP 401: {SAID}; {other.url}: it serves other-model, not 'test-model'; did you "
                    "mean 'other-model'?). Nothing was sent. Fix the model's name, check the key (its variable is "
                    "named with --api-key-env), or give --base-url for servers that serve 'test-model'.")
