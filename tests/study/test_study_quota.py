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
