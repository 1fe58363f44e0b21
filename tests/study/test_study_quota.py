"""In a study, one model's provider refusing for quota or billing ends that model's runs, not the others'.

Before, the refused run was retried request by request as an overload, and the model's next run was started and
refused again; now the refused run stops at its first refusal, the model's other runs are skipped with why (nothing
sent), the other models' runs go on, and the same command, once the account has credit, asks only what is missing.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, error_body, user_text
from support.probe_runs import add_modality, many_cases, scripted_answer
from support.workspace import run_cli

QUOTA = error_body("You exceeded your current quota, please check your plan and billing details.",
                   kind="insufficient_quota")


def test_a_quota_refusal_ends_that_models_runs_only_and_the_same_command_resumes_once_paid(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    add_modality(ws, ("M001", "M002"))
    account = {"paid": 1}

    def broke(body, n):
        return scripted_answer(body, n) if n <= account["paid"] else Scripted(429, QUOTA)

    with ChatServer(broke) as bad, ChatServer(scripted_answer) as good:
        good.models.append({"id": "other-model", "object": "model"})
        path = ws / "study.toml"
        path.write_text(f"[models.broke]\nmodel = 'openai:test-model'\nendpoint = '{bad.url}'\n"
                        "options = {max_retries = 3, backoff = 0.01}\n"
                        f"[models.paid]\nmodel = 'openai:other-model'\nendpoint = '{good.url}'\n"
                        "[suites.contextcanvas]\n[suites.modality]\n")
        first = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        assert first.exit_code == 1, first.output
        asked = bad.count
        assert asked <= 4  # contextcanvas's requests in flight, each asked once (never retried)
        assert any("grey block" in user_text(b) for b in good.requests)  # modality's requests carry its captions
        assert not any("grey block" in user_text(b) for b in bad.requests)  # nothing of modality sent
        states = {(r["model"], r["suite"]): r for r in json.loads(first.stdout)}
        assert states[("broke", "contextcanvas")]["state"] == "failed"
        assert "refused the request for quota or billing" in states[("broke", "contextcanvas")]["error"]
        skipped = states[("broke", "modality")]
        assert skipped["state"] == "skipped"
        assert skipped["error"] == ("not started, nothing sent: the provider refused broke's contextcanvas run for "
                                    "quota or billing; add credit to the account, then run the same command again")
        assert {states[("paid", s)]["state"] for s in ("contextcanvas", "modality")} == {"done"}

        account["paid"] = 1000
        again = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        assert again.exit_code == 0, again.output
        assert {r["state"] for r in json.loads(again.stdout)} == {"done"}
        assert not any(r["model"] == "paid" and r["sent"] for r in json.loads(again.stdout))


def test_a_studys_batch_results_refused_for_billing_are_said_once_and_not_sent_again_live(tmp_path):
    """``study run`` collecting a batch whose results say the account could not pay said nothing of them (``probe
    collect``'s line was dropped), then sent those requests live to the same account, to be refused again. Now the
    run says the billing line once, as its error (the run failed, as on a refusal live), sends nothing more, and the
    same command asks them once paid."""
    from support.batch_api_server import BatchServer

    ws = many_cases(tmp_path / "ws", 4)
    account = {"paid": False}

    def script(body, n):
        if not account["paid"] and ("picture 2 " in user_text(body) or "picture 3 " in user_text(body)):
            return Scripted(429, QUOTA)
        return scripted_answer(body, n)

    with BatchServer(script, polls=1) as server:
        path = ws / "study.toml"
        path.write_text(f"[models.api]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
                        "options = {max_retries = 1, backoff = 0.01}\n[suites.contextcanvas]\n")
        submitted = run_cli(["-w", str(ws), "study", "run", str(path), "--batch", "--json"])
        assert submitted.exit_code == 0, submitted.output
        collected = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert server.calls("POST", "/chat/completions") == 0, collected.output  # nothing sent live
        assert collected.exit_code == 1, collected.output
        text = " ".join(collected.stderr.split())
        assert text.count("You exceeded your current quota") == 1, text  # said once
        assert ("the provider refused 2 requests for quota or billing (HTTP 429: You exceeded your current quota, "
                "please check your plan and billing details): the account has no credit or quota left; they are "
                "stored as failed (not answered). Add credit to the account (or use a key of one that has it), then "
                "run the same command again: what was answered is kept") in text
        assert "never answered" not in text
        assert "api contextcanvas (failed)" in text

        account["paid"] = True
        again = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        assert again.exit_code == 0, again.output
        assert server.calls("POST", "/chat/completions") == 2  # only the two refused
        assert [r["state"] for r in json.loads(again.stdout)] == ["done"]
