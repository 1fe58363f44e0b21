"""The openai engine against a real HTTP server on 127.0.0.1 speaking the images API."""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
from hypothesis import given, settings
from PIL import Image
from hypothesis import strategies as st

from cfkit.editors import EditRequest
from cfkit.editors.openai_images import OpenAIEditor, plan_size, upload_png
from cfkit.errors import (EditorError, EditorKeyRefused, EditorTransport, EditorUnavailable, EditRefused, OptionError,
                          QuotaRefused)
from cfkit.images import png_bytes
from support.workspace import gradient_image, run_cli, tree_snapshot
from support.images_api_server import REPLY_COLOUR, ImagesAPI, serve
from support.store_sql import table_rows

SECRET = "sk-cfkit-test-9f3a1c7e5b2d4a6f8e0c"  # the loopback server's own key, in $IMAGES_SERVER_KEY
OFFICIAL_SECRET = "sk-official-test-1b2c3d4e5f60718293a4"  # $OPENAI_API_KEY: must never reach the loopback server
MODERATION = (400, {"error": {"message": "Your request was rejected by the safety system.",
                              "type": "image_generation_user_error", "param": None, "code": "moderation_blocked"}})
RATE_LIMIT = (429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})
SERVER_ERROR = (500, {"error": {"message": "The server had an error", "type": "server_error", "code": None}})


@pytest.fixture
def api(monkeypatch):
    state = ImagesAPI()
    url, server = serve(state)
    state.url = url  # where the tests may point base_url
    monkeypatch.setenv("OPENAI_API_KEY", OFFICIAL_SECRET)
    monkeypatch.setenv("IMAGES_SERVER_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    yield state
    server.shutdown()
    server.server_close()


def _request(width=200, height=64, n=1, box=(10, 30, 20, 60)) -> EditRequest:
    top, bottom, left, right = box
    mask = np.zeros((height, width), np.uint8)
    mask[top:bottom, left:right] = 255
    return EditRequest(spec_id="TX01", prompt="Make the block green.", image=gradient_image(width, height, 0),
                       mask=mask, n=n)


# ── size selection ─────────────────────────────────────────────────────────


@settings(max_examples=200, deadline=None)
@given(st.integers(8, 5000), st.integers(8, 5000))
def test_gpt_image_2_sizes_are_always_valid(width, height):
    plan = plan_size((width, height), "gpt-image-2", min_pixels=655_360, max_pixels=2560 * 1440)
    sw, sh = plan.sent
    assert sw % 16 == 0 and sh % 16 == 0
    assert 1 / 3 <= sw / sh <= 3
    assert 655_360 <= sw * sh <= 2560 * 1440
    pw, ph = plan.padded
    assert pw >= width and ph >= height and 1 / 3 <= pw / ph <= 3


def test_a_valid_size_is_sent_unchanged():
    plan = plan_size((1024, 768), "gpt-image-2", min_pixels=655_360, max_pixels=2560 * 1440)
    assert plan.sent == plan.padded == (1024, 768)


def test_older_models_get_a_standard_size():
    plan = plan_size((1600, 900), "gpt-image-1.5", min_pixels=655_360, max_pixels=2560 * 1440)
    assert plan.sent == (1536, 1024)
    assert plan.padded == (1600, round(1600 * 1024 / 1536))


def test_a_wide_source_is_padded_to_3_to_1_and_mapped_back():
    plan = plan_size((1000, 100), "gpt-image-2", min_pixels=655_360, max_pixels=2560 * 1440)
    assert plan.padded == (1000, 334)
    reply = np.zeros((plan.sent[1], plan.sent[0], 3), np.uint8)
    assert plan.reply_to_source(reply).shape == (100, 1000, 3)


# ── the wire ───────────────────────────────────────────────────────────────


def test_multipart_upload_names_types_mask_size_and_alpha(api):
    request = _request()
    result = OpenAIEditor(OpenAIEditor.Options(backoff=0, api_key_env="IMAGES_SERVER_KEY")).edit(request)
    assert len(api.requests) == 1
    sent = api.requests[0]
    assert sent.path == "/v1/images/edits"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.fields["model"] == "gpt-image-2"
    assert sent.fields["prompt"] == "Make the block green."
    assert sent.fields["quality"] == "high" and sent.fields["output_format"] == "png"
    assert "input_fidelity" not in sent.fields
    image, mask = sent.files["image"], sent.files["mask"]
    assert (image.filename, image.content_type) == ("image.png", "image/png")
    assert (mask.filename, mask.content_type) == ("mask.png", "image/png")
    width, height = (int(v) for v in sent.fields["size"].split("x"))
    assert image.image().size == mask.image().size == (width, height)
    assert mask.image().mode == "RGBA" and len(mask.data) < 4 * 1024 * 1024
    # Alpha 0 exactly where the (mapped) cfkit mask says "edit", 255 elsewhere.
    plan = OpenAIEditor(OpenAIEditor.Options()).plan(request.size)
    expected = plan.mask_to_send(request.mask)[..., 3]
    alpha = np.asarray(mask.image())[..., 3]
    assert set(np.unique(alpha)) == {0, 255}
    assert np.array_equal(alpha, expected)
    # The mask's edit box lands where the source box lands after scaling (rows 10..30 of 64+pad).
    scale_y = height / plan.padded[1]
    rows = np.flatnonzero((alpha == 0).any(axis=1))
    assert abs(rows[0] - 10 * scale_y) <= 1 and abs(rows[-1] + 1 - 30 * scale_y) <= 1
    assert result.usage["total_tokens"] == 4050


def test_the_uploaded_image_carries_the_planned_pixels_exactly(api):
    request = _request(width=200, height=64)
    OpenAIEditor(OpenAIEditor.Options(backoff=0)).edit(request)
    plan = OpenAIEditor(OpenAIEditor.Options()).plan(request.size)
    sent = np.asarray(api.requests[0].files["image"].image().convert("RGB"))
    assert np.array_equal(sent, plan.image_to_send(request.image))


def test_an_upload_near_its_limit_is_encoded_again_at_the_strongest_level():
    rng = np.random.default_rng(3)
    # Smooth with a little noise: zlib's levels differ clearly in size on it.
    ramp = np.linspace(0, 200, 256, dtype=np.float32)[None, :, None].repeat(256, 0).repeat(3, 2)
    array = (ramp + rng.integers(0, 4, ramp.shape)).astype(np.uint8)
    fast, small = len(png_bytes(array, compress_level=1)), len(png_bytes(array, compress_level=9))
    assert small < fast
    assert upload_png(array, limit=fast + 1) == png_bytes(array, compress_level=1)
    chosen = upload_png(array, limit=fast)
    assert len(chosen) == small
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(chosen))), array)


def test_non_square_source_is_sent_at_a_valid_size_and_mapped_back(api):
    result = OpenAIEditor(OpenAIEditor.Options(backoff=0)).edit(_request(width=200, height=64, n=2))
    assert api.requests[0].fields["size"] == "1392x480"  # padded 200x67 (3:1), scaled to ≥ 0.65 MP
    assert api.requests[0].fields["n"] == "2"
    assert len(result.images) == 2
    for image in result.images:
        assert image.shape == (64, 200, 3)
        assert (image == REPLY_COLOUR).all()
    assert result.params["size"] == "1392x480" and result.params["padded"] == "200x67"


def test_input_fidelity_only_for_models_that_take_it(api):
    OpenAIEditor(OpenAIEditor.Options(model="gpt-image-1.5", input_fidelity="high", backoff=0)).edit(_request())
    OpenAIEditor(OpenAIEditor.Options(model="gpt-image-2", input_fidelity="high", backoff=0)).edit(_request())
    assert api.requests[0].fields["input_fidelity"] == "high"
    assert api.requests[0].fields["size"] == "1536x1024"
    assert "input_fidelity" not in api.requests[1].fields


def test_429_and_500_are_retried(api):
    api.script = [RATE_LIMIT, SERVER_ERROR, None]
    result = OpenAIEditor(OpenAIEditor.Options(backoff=0)).edit(_request())
    assert len(api.requests) == 3
    assert result.images[0].shape == (64, 200, 3)


def test_transport_failure_after_the_retry_limit(api):
    api.script = [SERVER_ERROR] * 3
    with pytest.raises(EditorTransport, match=r"gave up after 3 attempts; last: HTTP 500"):
        OpenAIEditor(OpenAIEditor.Options(backoff=0, max_retries=2)).edit(_request())
    assert len(api.requests) == 3


def test_moderation_block_is_a_refusal_and_not_retried(api):
    api.script = [MODERATION, None]
    with pytest.raises(EditRefused, match="moderation_blocked"):
        OpenAIEditor(OpenAIEditor.Options(backoff=0, max_retries=3)).edit(_request())
    assert len(api.requests) == 1


@pytest.mark.parametrize("reply", [
    (429, {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                     "type": "insufficient_quota", "code": "insufficient_quota"}}),
    (400, {"error": {"message": "Billing hard limit has been reached", "type": "invalid_request_error",
                     "code": "billing_hard_limit_reached"}}),
    (403, {"error": {"message": "Billing is not active", "code": "billing_not_active"}}),
], ids=["429-insufficient_quota", "400-billing_hard_limit_reached", "403-billing_not_active"])
def test_an_account_without_credit_is_refused_at_once_not_retried(api, reply):
    api.script = [reply, None, None]
    with pytest.raises(QuotaRefused, match=r"refused the request for quota or billing .*not retried"):
        OpenAIEditor(OpenAIEditor.Options(backoff=0, max_retries=3)).edit(_request())
    assert len(api.requests) == 1


def test_timeouts_are_retried_then_a_transport_failure(api):
    api.script = [1.0, 1.0]
    with pytest.raises(EditorTransport, match=r"gave up after 2 attempts \(2 given up after the request was sent\); "
                                              r"last: timed out after 0.3 s") as info:
        OpenAIEditor(OpenAIEditor.Options(backoff=0, max_retries=1, timeout=0.3)).edit(_request())
    assert len(api.requests) == 2
    # both were sent, then given up: a service may bill them; the failure reads as a probe run's transport failure
    assert info.value.abandoned == 2 and info.value.failure == "Timeout: timed out after 0.3 s"


@pytest.mark.parametrize("reply, expected", [
    ((401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
     "wants a key (HTTP 401: Incorrect API key provided), and none was sent to it; name the variable holding its "
     "key with -o openai.api_key_env=NAME."),  # $OPENAI_API_KEY goes to the official API only
    ((400, {"error": {"message": "Invalid size '7x7'", "code": "invalid_value"}}),
     "request rejected (400 invalid_value): Invalid size '7x7'"),
    ((404, {"error": {"message": "The model 'gpt-image-9' does not exist", "code": "model_not_found"}}),
     "request failed (404 model_not_found): The model 'gpt-image-9' does not exist"),
], ids=["401", "400", "404"])
def test_client_errors_fail_at_once_with_the_reason(api, reply, expected):
    api.script = [reply, None]
    with pytest.raises(EditorError) as info:
        OpenAIEditor(OpenAIEditor.Options(backoff=0)).edit(_request())
    assert expected in str(info.value)
    # neither retried nor treated as "cannot run here"; a refused key is one no later spec can fare better against
    assert type(info.value) is (EditorKeyRefused if reply[0] == 401 else EditorError)
    assert len(api.requests) == 1
    assert SECRET not in str(info.value) and OFFICIAL_SECRET not in str(info.value)


def test_missing_openai_package_is_unavailable(api, monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` raise ImportError
    with pytest.raises(EditorUnavailable, match=r"pip install 'cfkit-probes\[openai\]'"):
        OpenAIEditor(OpenAIEditor.Options()).edit(_request())


def test_no_key_for_the_official_api_means_unavailable_and_nothing_is_sent(api, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(EditorUnavailable, match="OPENAI_API_KEY is not set"):
        OpenAIEditor(OpenAIEditor.Options()).edit(_request())
    with pytest.raises(EditorUnavailable, match="IMAGES_KEY_UNSET is not set. Export your key;"):
        OpenAIEditor(OpenAIEditor.Options(base_url=api.url, api_key_env="IMAGES_KEY_UNSET")).edit(_request())
    assert api.requests == []


def test_a_custom_server_never_receives_openai_api_key_and_the_withholding_is_noted(api):
    # $OPENAI_BASE_URL points at the loopback server while $OPENAI_API_KEY holds the official key.
    result = OpenAIEditor(OpenAIEditor.Options(backoff=0)).edit(_request())
    with_key = OpenAIEditor(OpenAIEditor.Options(backoff=0, api_key_env="IMAGES_SERVER_KEY")).edit(_request())
    headers = [r.headers["authorization"] for r in api.requests]
    assert headers == ["Bearer cfkit-no-key", f"Bearer {SECRET}"]
    assert all(OFFICIAL_SECRET not in json.dumps(r.headers) for r in api.requests)
    (note,) = [n for n in result.notes if "OPENAI_API_KEY" in n]
    assert note.startswith(f"$OPENAI_API_KEY was not sent to {api.url}") and "-o openai.api_key_env=NAME" in note
    assert not [n for n in with_key.notes if "OPENAI_API_KEY" in n]


def test_the_base_url_option_overrides_the_environment_and_its_credentials_are_redacted(api, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    with_credentials = api.url.replace("http://", "http://alice:s3cret-pass@")
    result = OpenAIEditor(OpenAIEditor.Options(backoff=0, base_url=with_credentials)).edit(_request())
    (sent,) = api.requests
    assert sent.headers["authorization"] == "Basic " + base64.b64encode(b"alice:s3cret-pass").decode()
    assert result.params["base_url"] == api.url.replace("http://", "http://***@")
    assert "s3cret-pass" not in json.dumps(result.params) + json.dumps(result.notes)


@pytest.mark.parametrize("base_url, message", [
    ("http://example.com\t/v1", "contains a tab"),
    ("http://[::1/v1", "is not a valid URL"),
    ("not a url", "is not a URL"),
    ("file:///etc/passwd", "is a file:// URL"),
])
def test_a_bad_base_url_is_refused_before_anything_is_sent(api, base_url, message):
    editor = OpenAIEditor(OpenAIEditor.Options(base_url=base_url))
    with pytest.raises(OptionError, match=message):
        editor.check(_request())
    with pytest.raises(OptionError, match=message):
        editor.edit(_request())
    assert api.requests == []


def test_no_key_over_plain_http_except_to_loopback(api, monkeypatch):
    editor = OpenAIEditor(OpenAIEditor.Options(base_url="http://images.example.com/v1", api_key_env="IMAGES_SERVER_KEY"))
    with pytest.raises(OptionError, match="refusing to send the key in \\$IMAGES_SERVER_KEY over plain http"):
        editor.check(_request())


def test_unreachable_server_is_a_transport_failure(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    with pytest.raises(EditorTransport, match="could not connect"):
        OpenAIEditor(OpenAIEditor.Options(backoff=0, max_retries=1, timeout=5)).edit(_request())


# ── through `cfkit edit` ───────────────────────────────────────────────────


def _scan_for_secret(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*")
            if p.is_file() and (SECRET.encode() in p.read_bytes() or OFFICIAL_SECRET.encode() in p.read_bytes())]


def test_cfkit_edit_openai_records_provenance_and_never_the_key(api, tiny_ws):
    result = run_cli(["edit", "TX01", "-w", str(tiny_ws), "--engine", "openai", "-n", "2", "--seed", "7"])
    assert result.exit_code == 0, result.output
    assert "the images API takes no seed" in result.stderr
    rows = table_rows(tiny_ws, "edits", order_by="id")
    assert [(r["engine"], r["model"], r["status"], r["candidate"]) for r in rows] == [
        ("openai", "gpt-image-2", "ok", 0), ("openai", "gpt-image-2", "ok", 1)]
    assert rows[0]["seed"] is None  # the API takes none, so none is claimed
    assert json.loads(rows[0]["usage"])["total_tokens"] == 4050
    assert json.loads(rows[0]["params"])["size"] == "992x672"  # 96x64 scaled up to ≥ 0.65 MP
    assert rows[0]["label"] == "synthetic counterfactual diagnostic"
    assert _scan_for_secret(tiny_ws) == []
    # $OPENAI_BASE_URL names the loopback server: $OPENAI_API_KEY stays home, and the edit and stderr say so.
    assert {r.headers["authorization"] for r in api.requests} == {"Bearer cfkit-no-key"}
    assert f"$OPENAI_API_KEY was not sent to {api.url}" in result.stderr
    assert any(n.startswith("$OPENAI_API_KEY was not sent") for n in json.loads(rows[0]["params"])["notes"])


def test_cfkit_edit_sends_the_key_named_by_api_key_env(api, tiny_ws):
    result = run_cli(["edit", "TX01", "-w", str(tiny_ws), "--engine", "openai", "-o", "api_key_env=IMAGES_SERVER_KEY"])
    assert result.exit_code == 0, result.output
    assert {r.headers["authorization"] for r in api.requests} == {f"Bearer {SECRET}"}
    assert "OPENAI_API_KEY" not in result.stderr
    assert _scan_for_secret(tiny_ws) == []


def test_cfkit_edit_refusal_is_recorded_shown_and_not_replaced(api, tiny_ws):
    api.script = [MODERATION]
    before = len(api.requests)
    result = run_cli(["edit", "TX01", "-w", str(tiny_ws), "--engine", "auto"])
    assert result.exit_code == 1
    assert "moderation_blocked" in result.stderr and "no other engine was tried" in result.stderr
    assert "Traceback" not in result.output
    assert len(api.requests) == before + 1
    rows = [tuple(r.values()) for r in table_rows(tiny_ws, "edits", "engine, status, error, raw_path")]
    assert len(rows) == 1
    assert rows[0][:2] == ("openai", "refused") and "moderation_blocked" in rows[0][2] and rows[0][3] is None
    assert not (tiny_ws / ".cfkit" / "edits").exists()
    assert _scan_for_secret(tiny_ws) == []


def test_dry_run_sends_nothing(api, tiny_ws):
    before = tree_snapshot(tiny_ws)
    result = run_cli(["edit", "TX01", "-w", str(tiny_ws), "--engine", "openai", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "size 992x672" in result.stdout and "Make the block green." in result.stdout
    assert "coverage 6.2%" in result.stdout
    assert api.requests == []
    assert tree_snapshot(tiny_ws) == before
