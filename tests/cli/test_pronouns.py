"""A pronoun after a count agrees with it (cfkit.plural.agree): "1 of 2 selected cases has no caption … (T002).
Write it", "1 draft failed; … retry it", never "Write them" of one; and "them" of several."""

from __future__ import annotations

import pytest

from support.caption_workspace import make_caption_ws
from support.chat_api_server import ChatServer, Scripted, completion
from support.edits import add_edit, inside_change, tiny_original
from support.probe_runs import add_modality
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("missing,words", [
    (("T002",), "(T002). Write it (neutral, evidence, author, reviewed) or have a model draft it with 'cfkit captions "
                "draft --model KIND:NAME T002'; 'cfkit captions lint' lists it."),
    (("T001", "T002"), "(T001, T002). Write them (neutral, evidence, author, reviewed) or have a model draft them "
                       "with 'cfkit captions draft --model KIND:NAME T001 T002'; 'cfkit captions lint' lists them."),
], ids=["one", "two"])
def test_the_missing_captions_line_says_it_of_one_and_them_of_several(tiny_ws, missing, words):
    add_modality(tiny_ws)
    for case in missing:
        (tiny_ws / "captions" / f"{case}.yaml").unlink()
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "modality"])
    assert result.exit_code != 0
    assert _said(result.stderr).endswith(words), result.stderr


def test_drafted_captions_of_several_cases_are_them(tiny_ws):
    add_modality(tiny_ws)
    for case in ("T001", "T002"):
        draft = tiny_ws / "captions" / f"{case}.yaml"
        draft.write_text(draft.read_text().replace("author: human\nreviewed: true",
                                                   "author: openai:gpt-5.5\nreviewed: false"))
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "modality"])
    assert result.exit_code == 0, result.stderr
    assert ("2 of 2 cases have a caption a model drafted and no person has reviewed: T001, T002. Read them and set "
            "'reviewed: true', or leave them out with --reviewed-only.") in _said(result.stderr)


@pytest.mark.parametrize("cases,line", [
    (("T001",), "error: 1 draft failed; run the command again to retry it."),
    (("T001", "T002"), "error: 2 drafts failed; run the command again to retry them."),
], ids=["one", "two"])
def test_failed_drafts_are_retried_as_it_or_them(tmp_path, cases, line):
    ws = make_caption_ws(tmp_path / "cws")
    for case in cases:
        (ws / "captions" / f"{case}.yaml").unlink()

    def cut_off(body, n):
        return Scripted(body=completion("A photograph of", model=body["model"], finish_reason="length"))

    with ChatServer(cut_off) as server:
        result = run_cli(["-w", str(ws), "captions", "draft", "--model", "openai:m", "-o", f"base_url={server.url}",
                          *cases], env={"COLUMNS": "250"})
        assert server.count == len(cases)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == line, result.stderr


def test_deciding_one_pending_edit_unseen_says_it(tiny_ws):
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    refused = run_cli(["review", "--pending", "--accept", "-w", str(tiny_ws)])
    assert refused.exit_code == 2
    assert refused.stderr.strip() == ("error: --pending --accept would accept the pending edit of 1 spec (TX01) "
                                      "without showing it; add --yes to do so, or look first with 'cfkit review "
                                      "--pending'.")


def test_one_reply_without_a_valid_answer_is_it_not_them():
    from cfkit.parse.trouble import reply_trouble

    assert reply_trouble("m s", 1, 1, 1, 0, 512, "cfkit runs unparsed R") == (
        "m s: 1 of 1 reply has no valid answer, and it is empty: no text came back (check the server's chat "
        "template, or whether the model answers only in its reasoning); 'cfkit runs unparsed R' shows it.")
    assert reply_trouble("m s", 1, 1, 0, 0, 512, "") == (
        "m s: 1 of 1 reply has no valid answer; the parser found no option in it (0 empty, 0 cut off at the token "
        "limit).")
    assert "2 of 3 replies have no valid answer, 2 of them empty" in reply_trouble("m s", 3, 2, 2, 0, 512, "")
