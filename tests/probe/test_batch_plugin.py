"""A third-party backend's batch API (what its ``batch_api()`` returns) is read through
:class:`cfkit.backends.batch_api.BatchAPI`'s defaults: one that defines no ``check_model`` (nor ``cancel``, nor
subclasses anything of cfkit) submits, and the user is told once, in the submission's output and the run's notes,
that the model was not checked; one that defines ``check_model`` is asked, and its refusal stops the run before
anything is uploaded. It used to fail with an AttributeError on ``check_model``. A backend whose batch API lacks
a required member, or that cannot read a batch's completions, is refused before anything is sent."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from support.batch_api_server import BatchServer
from support.chat_api_server import listing
from support.probe_runs import FAST, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli

MODULE = textwrap.dedent('''
    from cfkit.backends import Backend
    from cfkit.backends.openai_chat import OpenAIBackend
    from cfkit.errors import BackendUnavailable

    CHECKED = []


    class PlainBatches:
        """A batch API that subclasses nothing of cfkit and defines no check_model, cancel or file_deadline_s."""

        def __init__(self, inner):
            self.inner = inner
            self.endpoint = inner.endpoint

        async def upload(self, path):
            return await self.inner.upload(path)

        async def create(self, file_id, *, metadata):
            return await self.inner.create(file_id, metadata=metadata)

        async def get(self, batch_id):
            return await self.inner.get(batch_id)

        async def content(self, file_id):
            return await self.inner.content(file_id)

        async def aclose(self):
            await self.inner.aclose()


    class CheckingBatches(PlainBatches):
        async def check_model(self):
            CHECKED.append(self.inner.model)
            if self.inner.model.startswith("refused-"):
                raise BackendUnavailable(f"thirdbatch: {self.endpoint} does not serve '{self.inner.model}'.")
            return None


    class NoUpload:
        endpoint = "nowhere"


    class ThirdBackend(OpenAIBackend):
        kind = "thirdbatch"

        def batch_api(self):
            inner = super().batch_api()  # the HTTP calls: the OpenAI Files and Batches API's
            if self.name.startswith("no-upload"):
                return NoUpload()
            return (PlainBatches if self.name.startswith("plain-") else CheckingBatches)(inner)


    class UnreadableBackend(ThirdBackend):
        """A batch API, and the OpenAI lines, but no way to read a completion back (a plain Backend's default)."""

        kind = "unreadable"
        reply_from_completion = Backend.reply_from_completion
''')


@pytest.fixture
def thirdbatch(tmp_path: Path, monkeypatch):
    site = tmp_path / "site"
    info = site / "thirdbatch-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdbatch\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[cfkit.backends]\nthirdbatch = thirdparty_batches:ThirdBackend\n"
                                           "unreadable = thirdparty_batches:UnreadableBackend\n")
    (site / "thirdparty_batches.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("thirdparty_batches", None)
    yield
    sys.modules.pop("thirdparty_batches", None)


def batch_run(ws, url, model, *extra):
    where = ["--base-url", url] if model.startswith("openai:") else ["-o", f"base_url={url}"]
    return run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", *where, *FAST, "--batch",
                    *extra])


def test_a_batch_api_without_check_model_submits_and_says_once_that_the_model_was_not_checked(tiny_ws, thirdbatch):
    with BatchServer(scripted_answer, polls=0) as server:
        server.models = listing("plain-model")
        sent = batch_run(tiny_ws, server.url, "thirdbatch:plain-model")
        assert sent.exit_code == 0, sent.output
        run_id = sent.stdout.strip()
        assert server.calls("POST", "/batches") == 1 and server.calls("GET", "/models") == 0
        collected = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id, "--json"])
    said = ("thirdbatch:plain-model: the model was not checked before the batch was submitted (PlainBatches defines "
            "no check_model()); a name the provider does not serve shows only when 'cfkit probe collect' reads the "
            "batch")
    assert sent.stderr.count("the model was not checked") == 1 and said in " ".join(sent.stderr.split())
    assert collected.exit_code == 0, collected.output
    assert json.loads(collected.stdout)["stored"] == 3
    (run,) = table_rows(tiny_ws, "runs")
    assert said in json.loads(run["notes"])["backend_notes"]


def test_a_batch_api_s_check_model_is_asked_and_its_refusal_stops_the_run(tiny_ws, thirdbatch):
    import thirdparty_batches

    with BatchServer(scripted_answer, polls=0) as server:
        sent = batch_run(tiny_ws, server.url, "thirdbatch:checked-model", "--json")
        refused = batch_run(tiny_ws, server.url, "thirdbatch:refused-model")
        assert server.calls("POST", "/batches") == 1 and server.calls("POST", "/files") == 1
    assert thirdparty_batches.CHECKED == ["checked-model", "refused-model"]
    assert sent.exit_code == 0, sent.output
    assert json.loads(sent.stdout)["notes"] == [] and "not checked" not in sent.stderr
    assert refused.exit_code != 0
    assert refused.stderr.strip().splitlines() == [f"error: thirdbatch: {server.url} does not serve 'refused-model'."]


def test_a_built_in_that_could_not_check_says_so_once(tiny_ws):
    """The OpenAI batch API against a server without GET /models: submitted, and said (before: silently)."""
    with BatchServer(scripted_answer) as server:
        sent = batch_run(tiny_ws, server.url, "openai:test-model", "--json")
    assert sent.exit_code == 0, sent.output
    (note,) = json.loads(sent.stdout)["notes"]
    assert note.startswith(f"openai:test-model: the model was not checked before the batch was submitted ({server.url}:"
                           " it did not answer GET /models: HTTP 404: no route /v1/models)")
    assert sent.stderr.count("the model was not checked") == 1


def test_a_batch_api_or_backend_lacking_what_a_batch_needs_is_refused_in_one_line(tiny_ws, thirdbatch):
    with BatchServer(scripted_answer, polls=0) as server:
        no_upload = batch_run(tiny_ws, server.url, "thirdbatch:no-upload-model")
        unreadable = batch_run(tiny_ws, server.url, "unreadable:plain-model")
        assert server.calls("POST", "/files") == server.calls("POST", "/batches") == 0
    assert no_upload.exit_code == 2
    assert no_upload.stderr.strip().splitlines()[-1] == (
        "error: NoUpload (a batch API) defines no upload(path); its backend cannot run --batch. Run without --batch, "
        "or give the batch API that method.")
    assert unreadable.exit_code == 2
    assert unreadable.stderr.strip().splitlines() == [
        "error: unreadable:plain-model has a batch API but defines no reply_from_completion() (see 'Adding a "
        "backend' in the README); nothing was sent. Run it without --batch."]
