"""The EGA audit labelled in Label Studio or Argilla: export, label in the tool's own format, import.

The tools' exports are written here by hand from their documented formats:
Label Studio's JSON export (https://labelstud.io/guide/export.html: a list of
tasks with ``data``, ``annotations[].result[]`` of ``from_name``, ``to_name``,
``type`` and ``value.choices`` / ``value.text``, ``was_cancelled``,
``updated_at``) and Argilla's records (https://docs.argilla.io, ``Record``:
``id``, ``fields``, ``metadata``, ``suggestions``, ``responses`` as
``{question: [{"value", "user_id"}]}``).
"""

from __future__ import annotations

import json
import shutil

import pytest

from support import audit_workspace as aw
from support.audit_session import _items, blind, cli, decision, plan, yn


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = aw.build(tmp_path_factory.mktemp("audit-tools") / "ws")
    run_ids = aw.run_models(root)
    plan(root, run_ids)
    return root, run_ids


def copy(planned, tmp_path, name):
    root, run_ids = planned
    shutil.copytree(root, tmp_path / name)
    return tmp_path / name


NOTES = {"AU03": "the reply is a title, not an answer"}


def label_directly(ws):
    truth = _items(ws)
    for name in ("alice", "bob"):
        for item, (model, case) in truth.items():
            cue, link = decision(name, model, case)
            extra = ["--note", NOTES[case]] if case in NOTES and name == "alice" else []
            cli(ws, "audit", "label", item, "--as", name, "--cue", yn(cue), "--link", yn(link), *extra)


def label_studio_annotation(values: dict, updated: str, *, cancelled: bool = False) -> dict:
    result = [{"id": f"r{k}", "from_name": k, "to_name": "response", "type": "choices",
               "value": {"choices": [v]}, "origin": "manual"} for k, v in values.items() if k != "note"]
    if values.get("note"):
        result.append({"id": "rnote", "from_name": "note", "to_name": "response", "type": "textarea",
                       "value": {"text": [values["note"]]}, "origin": "manual"})
    return {"id": 1, "completed_by": 7, "result": result, "was_cancelled": cancelled, "ground_truth": False,
            "created_at": updated, "updated_at": updated, "lead_time": 12.5}


def label_in_tools(ws, tmp_path, fmt, run_ids):
    truth = _items(ws)
    for name in ("alice", "bob"):
        exported = tmp_path / f"{name}-{fmt}.json"
        cli(ws, "audit", "export", "--as", name, "--format", fmt, "--output", str(exported))
        text = exported.read_text()
        assert blind(text, run_ids) and not any(w in text.lower() for w in aw.FORBIDDEN) and name not in text
        tasks = json.loads(text)
        assert len(tasks) == 18
        labelled = []
        for number, task in enumerate(tasks, start=1):
            item = task["data"]["item"] if fmt == "label-studio" else task["id"]
            model, case = truth[item]
            cue, link = decision(name, model, case)
            values = {"cue": yn(cue), "link": yn(link)}
            if case in NOTES and name == "alice":
                values["note"] = NOTES[case]
            if fmt == "label-studio":
                # As Label Studio exports a project: ids, a cancelled first try with other answers, the kept one.
                wrong = {"cue": yn(not cue), "link": yn(not link)}
                labelled.append({"id": 100 + number, "data": task["data"], "predictions": task.get("predictions", []),
                                 "annotations": [label_studio_annotation(wrong, "2026-11-02T10:00:00Z", cancelled=True),
                                                 label_studio_annotation(values, "2026-11-02T10:05:00Z")],
                                 "project": 3, "created_at": "2026-11-02T09:00:00Z"})
            else:
                labelled.append(task | {"status": "completed", "_server_id": f"uuid-{number}",
                                        "responses": {k: [{"value": v, "user_id": "u-7"}] for k, v in values.items()}})
        filled = tmp_path / f"{name}-{fmt}-done.json"
        filled.write_text(json.dumps(labelled))
        result = cli(ws, "audit", "import", str(filled), "--as", name, "--format", fmt)
        assert "18 labels saved" in result.stderr


def outcome(ws):
    agreement = json.loads(cli(ws, "audit", "agreement", "--json", "--resamples", "300").stdout)
    truth = _items(ws)
    for item in sorted({d["item"] for d in agreement["disagreements"]}):
        cue, link = decision("alice", *truth[item])
        cli(ws, "audit", "resolve", item, "--as", "carol", "--cue", yn(cue), "--link", yn(link), "--note", "agreed")
    report = json.loads(cli(ws, "report", "--ega", "--format", "json", "--resamples", "300").stdout)
    items = json.loads(cli(ws, "audit", "items", "--reveal", "--json").stdout)
    labels = sorted((i["item"], name, {k: v for k, v in label.items() if k != "updated_at"})
                    for i in items for name, label in i["labels"].items())
    return agreement, report["ega"], labels


@pytest.mark.parametrize("fmt", ["label-studio", "argilla"])
def test_a_tool_round_trip_gives_the_same_agreement_and_table_s8(planned, tmp_path, fmt):
    direct = copy(planned, tmp_path, "direct")
    label_directly(direct)
    tools = copy(planned, tmp_path, "tools")
    label_in_tools(tools, tmp_path, fmt, planned[1])
    agreement, s8, labels = outcome(direct)
    agreement_t, s8_t, labels_t = outcome(tools)
    assert labels_t == labels
    assert agreement_t == agreement and agreement["criteria"]["cue"]["n"] == 18
    assert s8_t == s8 and [r["model"] for r in s8] == list(aw.MODELS)


def test_a_malformed_task_saves_nothing(planned, tmp_path):
    ws = copy(planned, tmp_path, "bad")
    exported = tmp_path / "tasks.json"
    cli(ws, "audit", "export", "--as", "alice", "--format", "label-studio", "--output", str(exported))
    tasks = json.loads(exported.read_text())
    tasks[0]["annotations"] = [label_studio_annotation({"cue": "yes", "link": "yes"}, "t")]
    tasks[1]["annotations"] = [label_studio_annotation({"cue": "perhaps", "link": "yes"}, "t")]
    exported.write_text(json.dumps(tasks))
    result = cli(ws, "audit", "import", str(exported), "--as", "alice", "--format", "label-studio", code=2)
    assert f"{exported}:2: cue is 'perhaps'; write yes or no" in result.stderr
    status = json.loads(cli(ws, "audit", "status", "--json").stdout)
    assert all(a["labelled"] == 0 for a in status["annotators"])


def test_argilla_rows_flattened_by_to_list_are_read(planned, tmp_path):
    ws = copy(planned, tmp_path, "flat")
    exported = tmp_path / "records.json"
    cli(ws, "audit", "export", "--as", "alice", "--format", "argilla", "--output", str(exported))
    truth = _items(ws)
    rows = []
    for record in json.loads(exported.read_text()):
        cue, link = decision("alice", *truth[record["id"]])
        rows.append({"id": record["id"], **record["fields"], "status": "completed",
                     "cue.responses": [yn(cue)], "cue.responses.users": ["u-7"],
                     "link.responses": [yn(link)], "link.responses.users": ["u-7"]})
    exported.write_text(json.dumps(rows))
    assert "18 labels saved" in cli(ws, "audit", "import", str(exported), "--as", "alice", "--format",
                                      "argilla").stderr
    items = {i["item"]: i for i in json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout)}
    assert {k: (v["label"]["cue"], v["label"]["link"]) for k, v in items.items()} == \
        {k: decision("alice", *truth[k]) for k in truth}
