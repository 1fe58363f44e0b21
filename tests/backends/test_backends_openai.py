"""The openai backend against a real Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, error_body
from cfkit.backends import TransportError, load_backend, parse_option_pairs
from cfkit.errors import BackendError, BackendUnavailable, InputError
from support.backend_requests import PNG, ask

SECRET = "sk-test-secret-value-0123456789"


def backend(url: str, **options):
    fast = {"base_url": url, "backoff": 0.01, "max_retries": 3, "timeout": 5}
    return load_backend("openai:test-model", fast | options)


def test_request_wire_format():
    with ChatServer() as server:
        reply = ask(backend(server.url))
    body = server.requests[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64  # custom servers get max_tokens by default
    assert body["messages"][0] == {"role": "system", "content": "Answer from the supplied content only."}
    text, image = body["messages"][1]["content"]
    assert text == {"type": "text", "text": "Question: fit?\n\nOptions:\nA. Yes\nB. No"}
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"][len(prefix):]) == PNG
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["properties"]["answer"]["enum"] == ["A", "B"]
    assert json.loads(reply.raw)["answer"] == "A"
    assert reply.usage["prompt_tokens"] == 100 and reply.latency_s > 0
    assert reply.cost_usd is None and reply.notes == ()


def test_server_rejecting_response_format_falls_back_to_text_once():
    def script(body, n):
        if "response_format" in body:
            return Scripted(400, error_body("Unrecognized request argument supplied: response_format",
                                            param="response_format"))
        return Scripted(body=completion("B"))

    with ChatServer(script) as server:
        b = backend(server.url)
        first = ask(b)
        second = ask(b)
    assert [("response_format" in r) for r in server.requests] == [True, False, False]
    assert first.raw == "B" and first.notes == ("server refused response_format; asked for plain text",)
    assert second.notes == ()


def test_reasoning_model_style_refusals_of_temperature_and_max_tokens():
    # Some models take neither temperature=0 nor max_tokens: drop the one, rename the other, note both.
    def script(body, n):
        if "temperature" in body:
            return Scripted(400, error_body("Unsupported value: 'temperature' does not support 0 with this model.",
                                            param="temperature"))
        if "max_tokens" in body:
            return Scripted(400, error_body("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                            "Use 'max_completion_tokens' instead.", param="max_tokens"))
        return Scripted(body=completion(answer_json("A")))

    with ChatServer(script) as server:
        b = backend(server.url)
        reply = ask(b)
        ask(b)
    assert server.count == 3 + 1  # two refusals once, then straight through
    assert reply.notes == ("server refused temperature=0; it used its default temperature",
                           "server refused max_tokens; sent max_completion_tokens instead")
    assert server.requests[-1]["max_completion_tokens"] == 64 and "temperature" not in server.requests[-1]


def test_429_then_200_honours_retry_after():
    def script(body, n):
        if n == 1:
            return Scripted(429, error_body("slow down", kind="rate_limit_error"), {"retry-after-ms": "400"})
        return Scripted(body=completion(answer_json("B")))

    with ChatServer(script) as server:
        started = time.perf_counter()
        reply = ask(backend(server.url, backoff=0.0))
        elapsed = time.perf_counter() - started
    assert server.count == 2
    assert elapsed >= 0.4  # waited as the server asked, although the backoff is zero
    assert json.loads(reply.raw)["answer"] == "B"
    assert reply.retries == 1 and reply.notes == ()  # counted, and said once for the run (cfkit.probe.sending)


def test_a_429_without_retry_after_waits_for_the_used_up_limit_to_reset():
    """OpenAI's 429 says when the limit resets in x-ratelimit-reset-*; retried sooner, every attempt was refused
    again (here: the last one too, and the request failed)."""
    first: list[float] = []

    def script(body, n):
        first.append(time.monotonic())
        if first[-1] - first[0] < 2.0:  # the request limit resets 2 s after the first refusal
            return Scripted(429, error_body("Rate limit reached for requests", kind="requests"),
                            {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s",
                             "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "6m0s"})
        return Scripted(body=completion(answer_json("B")))

    with ChatServer(script) as server:
        reply = ask(backend(server.url, backoff=0.01, max_retries=2))
    assert json.loads(reply.raw)["answer"] == "B"
    assert server.count == 2  # one refusal, then the answer: no attempt before the reset


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms"}, 0.02),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30.5s"}, 90.5),
    ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1h2m3s",
      "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3"}, 3723),
    ({"x-ratelimit-remaining-tokens": "12", "x-ratelimit-reset-tokens": "6m0s"}, None),  # not used up
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "soon"}, None),
    ({"retry-after": "7", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}, 7),
])
def test_the_wait_a_refusal_asks_for_comes_from_retry_after_else_the_used_up_limits_reset(headers, seconds):
    from cfkit.backends.http import server_wait

    assert server_wait(headers) == (None if seconds is None else pytest.approx(seconds))


def test_500_then_200_is_retried():
    def script(body, n):
        return Scripted(500, error_body("boom", kind="server_error")) if n == 1 else Scripted(body=completion("A"))

    with ChatServer(script) as server:
        reply = ask(backend(server.url))
    assert server.count == 2 and reply.raw == "A"


def test_persistent_5xx_gives_transport_error_after_bounded_retries():
    with ChatServer(lambda body, n: Scripted(503, error_body("down", kind="server_error"))) as server:
        with pytest.raises(TransportError, match="HTTP 503 .* after 3 attempts"):
            ask(backend(server.url, max_retries=2))
    assert server.count == 3


def test_other_4xx_is_not_retried():
    with ChatServer(lambda body, n: Scripted(422, error_body("image too large"))) as server:
        with pytest.raises(TransportError, match="HTTP 422"):
            ask(backend(server.url))
    assert server.count == 1


def test_timeout_is_retried_then_reported():
    with ChatServer(lambda body, n: Scripted(body=completion("A"), delay=1.0)) as server:
        with pytest.raises(TransportError, match="Timeout"):
            ask(backend(server.url, timeout=0.2, max_retries=1))
    assert server.count == 2


@pytest.mark.parametrize("key, said", [
    (None, "wants a key (HTTP 401: bad key), and none was sent to it; name the variable holding its key with "
           "-o api_key_env=NAME."),
    ("CFKIT_TEST_KEY", "refused the key (HTTP 401: bad key). Check the key in its environment variable, or name "
                       "another variable with -o api_key_env=NAME."),
], ids=["no key sent", "a key sent"])
def test_rejected_key_stops_with_backend_unavailable(monkeypatch, key, said):
    monkeypatch.setenv("CFKIT_TEST_KEY", "wrong")
    with ChatServer(lambda body, n: Scripted(401, error_body("bad key", kind="invalid_api_key"))) as server:
        with pytest.raises(BackendUnavailable) as info:
            ask(backend(server.url, api_key_env=key))
    assert server.count == 1
    assert str(info.value) == f"openai backend: {server.url} {said}"


def test_unknown_model_is_a_backend_error():
    with ChatServer(lambda body, n: Scripted(404, error_body("model not found"))) as server:
        with pytest.raises(BackendError, match="has no model 'test-model'"):
            ask(backend(server.url))


def test_refusal_is_marked():
    with ChatServer(lambda body, n: Scripted(body=completion(None, refusal="I can't help with that."))) as server:
        reply = ask(backend(server.url))
    assert reply.refused and reply.raw == "I can't help with that."


def test_cost_from_prices():
    with ChatServer() as server:
        b = backend(server.url, price_in=2.0, price_out=10.0)
        reply = ask(b)
    assert b.priced
    assert reply.cost_usd == pytest.approx((100 * 2.0 + 20 * 10.0) / 1e6)


def cached_reply(cached_tokens):
    return lambda body, n: Scripted(body=completion(answer_json("A"), prompt_tokens=1000, completion_tokens=20,
                                                    cached_tokens=cached_tokens))


def test_cached_input_tokens_cost_the_cached_price():
    with ChatServer(cached_reply(800)) as server:
        reply = ask(backend(server.url, price_in=2.0, price_out=10.0, price_cached_in=0.5))
    # 200 uncached at 2, 800 cached at 0.5, 20 out at 10 (USD a million).
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 800 * 0.5 + 20 * 10.0) / 1e6)
    assert reply.notes == ()
    assert reply.usage["prompt_tokens_details"]["cached_tokens"] == 800  # kept with the reply, as reported


def test_cached_input_without_a_cached_price_costs_the_input_price_and_says_so():
    with ChatServer(cached_reply(800)) as server:
        reply = ask(backend(server.url, price_in=2.0, price_out=10.0))
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 20 * 10.0) / 1e6)
    [note] = reply.notes
    assert "cached input tokens (usage.prompt_tokens_details.cached_tokens)" in note
    assert "priced at the full input rate" in note and "-o price_cached_in=" in note


@pytest.mark.parametrize("cached", [1001, -5, "800", 12.5])
def test_an_unusable_cached_count_prices_the_whole_input_at_the_input_price_and_says_so(cached):
    with ChatServer(cached_reply(cached)) as server:
        reply = ask(backend(server.url, price_in=2.0, price_out=10.0, price_cached_in=0.5))
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 20 * 10.0) / 1e6)  # never less than at the input price
    [note] = reply.notes
    assert "cached input token count that is not a whole number" in note and "full input rate" in note


def test_no_cached_tokens_means_no_note_and_the_plain_price():
    with ChatServer(cached_reply(0)) as server:
        reply = ask(backend(server.url, price_in=2.0, price_out=10.0))
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 20 * 10.0) / 1e6) and reply.notes == ()


def test_custom_base_url_never_receives_openai_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LOCAL_SERVER_KEY", "local-key-42")
    with ChatServer() as server:
        ask(backend(server.url))
        ask(backend(server.url, api_key_env="LOCAL_SERVER_KEY"))
    assert all(SECRET not in json.dumps(h) for h in server.headers)
    assert server.headers[0]["authorization"] == "Bearer cfkit-no-key"
    assert server.headers[1]["authorization"] == "Bearer local-key-42"


def test_base_url_from_environment(monkeypatch):
    with ChatServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        b = load_backend("openai:test-model")
        ask(b)
    assert server.count == 1 and b.base_url == server.url


def test_official_endpoint_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match=r"\$OPENAI_API_KEY is not set"):
        load_backend("openai:gpt-5.5")
    with pytest.raises(BackendUnavailable, match=r"\$MY_KEY is not set"):
        load_backend("openai:test", {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY"})


def test_official_endpoint_uses_max_completion_tokens(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    b = load_backend("openai:gpt-5.5")
    assert b.official and b.token_param == "max_completion_tokens"
    assert SECRET not in json.dumps(b.cache_identity)


def test_options_are_validated():
    with pytest.raises(InputError, match=r"no option 'temperature' \(-o temperature=1\). Allowed: base_url, api_key_env, timeout"):
        load_backend("openai:m", {"base_url": "http://x/v1", "temperature": "1"})
    with pytest.raises(InputError, match="-o timeout=soon"):
        load_backend("openai:m", {"base_url": "http://x/v1", "timeout": "soon"})
    with pytest.raises(InputError, match="-o detail=medium"):
        load_backend("openai:m", {"base_url": "http://x/v1", "detail": "medium"})
    assert load_backend("openai:m", {"base_url": "http://x/v1", "timeout": "2.5"}).options.timeout == 2.5
    with pytest.raises(InputError, match="not KEY=VALUE"):
        parse_option_pairs(["timeout"])
    with pytest.raises(InputError, match="given twice"):
        parse_option_pairs(["a=1", "a=2"])


def test_unknown_kind_and_malformed_model():
    with pytest.raises(InputError, match="Unknown backend 'sdxl'. Installed: anthropic, baseline, hf, openai, replay"):
        load_backend("sdxl:v1")
    with pytest.raises(InputError, match="not KIND:NAME"):
        load_backend("gpt-5.5")


def test_cache_identity_excludes_transport_settings():
    a = backend("http://127.0.0.1:1/v1", timeout=1, max_retries=0, price_in=1.0, price_out=1.0)
    b = backend("http://127.0.0.1:1/v1", timeout=99, max_retries=9)
    c = backend("http://127.0.0.1:2/v1")
    assert a.cache_identity == b.cache_identity
    assert a.cache_identity != c.cache_identity


def test_reply_carries_reasoning_server_model_and_fingerprint():
    body = completion(answer_json("B"), model="served-as-this") | {"system_fingerprint": "fp_abc123"}
    body["choices"][0]["message"]["reasoning_content"] = "The sign faces away from the road, so…"
    with ChatServer(lambda b, n: Scripted(body=body)) as server:
        reply = ask(backend(server.url))
    assert json.loads(reply.raw)["answer"] == "B"  # the reasoning never enters the graded text
    assert reply.reasoning == "The sign faces away from the road, so…"
    assert reply.server_model == "served-as-this" and reply.system_fingerprint == "fp_abc123"
    assert reply.raw_chars is None


def test_reasoning_under_its_other_name_and_absent_fields():
    body = completion("A")
    body["choices"][0]["message"] |= {"reasoning_content": None, "reasoning": "short trace"}
    del body["model"]
    with ChatServer(lambda b, n: Scripted(body=body)) as server:
        reply = ask(backend(server.url))
    assert reply.reasoning == "short trace" and reply.server_model is None and reply.system_fingerprint is None


def test_backend_says_where_it_sends_and_with_what():
    with ChatServer() as server:
        b = backend(server.url.replace("http://", "http://bob:hunter2@"))
        ask(b)
    assert b.endpoint == server.url.replace("http://", "http://***@")
    assert "hunter2" not in json.dumps(b.cache_identity) + json.dumps(b.options.model_dump(mode="json"))
    assert set(b.versions) == {"aiohttp", "orjson"} and all(b.versions.values())


def test_redirects_are_not_followed():
    def script(body, n):
        return Scripted(307, {}, {"location": "http://elsewhere.example:8000/v1/chat/completions"})

    with ChatServer(script) as server:
        with pytest.raises(TransportError, match=r"HTTP 307 .* redirects are not followed; give the address it "
                                                 r"points to \(http://elsewhere.example:8000/v1/chat/completions\)"):
            ask(backend(server.url))
    assert server.count == 1


def test_error_messages_are_the_servers_own_text_on_one_line():
    def script(body, n):
        return Scripted(422, {"detail": "image\nis too large"})

    with ChatServer(script) as server:
        with pytest.raises(TransportError) as info:
            ask(backend(server.url))
    assert str(info.value) == f"HTTP 422 from {server.url}: image is too large"


def test_malformed_body_is_retried_then_reported():
    with ChatServer(lambda b, n: Scripted(body=None) if n == 1 else Scripted(body=completion("A"))) as server:
        # Scripted(body=None) sends "{}": a JSON object without choices, which no retry would mend.
        with pytest.raises(TransportError, match="completion without choices"):
            ask(backend(server.url))
    assert server.count == 1


@pytest.mark.parametrize("error", [{"message": "the model\nis overloaded", "code": "model_unavailable"},
                                   "the model is overloaded"])
def test_an_error_in_a_200_reply_is_said_in_the_servers_words(error):
    """A server or proxy that answers 200 with an error object: the failure carries its words (it had said only
    that the completion had no choices)."""
    with ChatServer(lambda b, n: Scripted(body={"error": error})) as server:
        with pytest.raises(TransportError) as info:
            ask(backend(server.url))
    assert str(info.value) == (f"{server.url} answered with an error instead of a completion: the model is "
                               "overloaded")


@pytest.mark.parametrize("error", [{"message": "Rate limit exceeded", "code": 429},
                                   {"message": "Rate limit exceeded", "type": "rate_limit_error", "code": None},
                                   {"message": "upstream failed", "code": "502"}])
def test_a_200_whose_error_names_a_rate_limit_or_server_error_is_retried_as_that_status(error):
    """Some proxies answer 200 with the upstream's 429 or 5xx in an error object: before, the request failed at
    once (left for the next run) and the run never backed off."""
    overloads = []

    def script(body, n):
        return Scripted(body={"error": error}) if n == 1 else Scripted(body=completion(answer_json("B")))

    with ChatServer(script) as server:
        answering = backend(server.url, backoff=0.01)
        answering.on_overload = overloads.append
        reply = ask(answering)
    assert json.loads(reply.raw)["answer"] == "B" and server.count == 2
    assert reply.retries == 1 and reply.notes == ()  # counted, and said once for the run (cfkit.probe.sending)
    assert len(overloads) == (0 if error.get("code") == "502" else 1)  # a 429 lowers the run's concurrency


def test_a_200_rate_limit_error_that_persists_fails_as_a_429_the_run_counts_as_overload():
    with ChatServer(lambda b, n: Scripted(body={"error": {"message": "Rate limit exceeded", "code": 429}})) as s:
        with pytest.raises(TransportError) as info:
            ask(backend(s.url, backoff=0.01, max_retries=1))
    assert str(info.value) == f"HTTP 429 from {s.url} after 2 attempts: Rate limit exceeded"
    assert s.count == 2


def test_answering_does_not_import_the_openai_sdk():
    import subprocess
    import sys

    from support.workspace import REPO

    code = ("import asyncio, sys\nsys.path.insert(0, 'tests')\nfrom support.chat_api_server import ChatServer\n"
            "from cfkit.backends import load_backend\nfrom support.backend_requests import ask\n"
            "with ChatServer() as server:\n    reply = ask(load_backend('openai:m', {'base_url': server.url}))\n"
            "print('OPENAI' if 'openai' in sys.modules else 'NO-OPENAI', reply.raw[:1])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert "NO-OPENAI {" in result.stdout, result.stdout + result.stderr
