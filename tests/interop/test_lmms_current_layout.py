"""lmms-eval's samples files as lmms-eval 0.4 and later write them: no ``doc`` or ``arguments``, the per-request
list taken off a doc of one request, and ``resps`` dropped where the task's filter left the reply as it was.

Before, cfkit refused every such line ("an lmms-eval sample has 'doc_id' and 'resps'; this line does not"), and
the format was not even recognised: a current lmms-eval run could not be compared at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.interop_files import write_peer_files
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    return write_peer_files(tmp_path_factory.mktemp("lmms-current"))


def saved(sample: dict) -> dict:
    """``sample`` (a line as lmms_eval/evaluator.py logs it) as EvaluationTracker.save_results_samples writes it
    today (lmms_eval/loggers/evaluation_tracker.py at 75571cf): the prompt kept as ``input``, the per-request
    wrapper taken off a doc of one request, ``resps`` dropped where it equals ``filtered_resps``, ``doc`` and
    ``arguments`` dropped, ``target`` as text."""
    sample = dict(sample)
    sample["input"] = sample["arguments"][0]
    if isinstance(sample["resps"], list) and len(sample["resps"]) == 1:
        sample["resps"] = sample["resps"][0]
    if isinstance(sample["filtered_resps"], list) and len(sample["filtered_resps"]) == 1:
        sample["filtered_resps"] = sample["filtered_resps"][0]
    if sample["resps"] == sample["filtered_resps"]:
        sample.pop("resps")
    elif isinstance(sample["resps"], list) and len(sample["resps"]) == 1 and sample["resps"][0] == sample["filtered_resps"]:
        sample.pop("resps")
    sample["target"] = str(sample["target"])
    sample.pop("arguments")
    sample.pop("doc")
    return sample


def _write(folder: Path, name: str, lines: list[dict], results: Path) -> Path:
    folder.mkdir(parents=True)
    path = folder / name
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    (folder / results.name).write_text(results.read_text())
    return path


def _rows(ws: Path, *args: str) -> tuple[list[dict], str]:
    made = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "200", *args])
    assert made.exit_code == 0, made.output
    return json.loads(made.stdout)["contextcanvas"], " ".join(made.stderr.split())


@pytest.mark.parametrize("extraction", [True, False], ids=["filter-extracts", "filter-keeps-the-reply"])
def test_a_current_lmms_eval_samples_file_reads_as_the_older_layout_does(peer_files, tmp_path, extraction):
    ws, files = peer_files
    older = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    if not extraction:  # a task whose filter is 'none': what it logs as filtered is the reply itself
        older = [dict(line, filtered_resps=[line["resps"][0][0]]) for line in older]
    results = files["lmms"].with_name("20261102_100000_results.json")
    before = _write(tmp_path / "older" / "peer-vlm", files["lmms"].name, older, results)
    now = _write(tmp_path / "now" / "peer-vlm", files["lmms"].name, [saved(line) for line in older], results)
    lines = [json.loads(line) for line in now.read_text().splitlines()]
    assert all("doc" not in line and "arguments" not in line for line in lines)
    assert all(("resps" in line) is extraction for line in lines)  # dropped where the filter kept the reply
    mapping = tmp_path / "map.csv"  # the doc is gone: its id is doc_id, mapped to the case as a user does
    mapping.write_text("".join(f"{i},{line['doc']['id']}\n" for i, line in enumerate(older)))
    expected, said_before = _rows(ws, "--predictions", str(before))
    got, said = _rows(ws, "--predictions", str(now), "--map", str(mapping))  # found as lmms-eval's: no format given
    assert [r["model"] for r in got] == [r["model"] for r in expected] == ["Peer-VLM"]
    for key in ("n", "accuracy", "macro_f1", "invalid"):
        assert got[0][key] == expected[0][key], key
    read = f"{now.name}: 100 replies read with cfkit's parser"
    if extraction:  # the task's extraction, beside the reply, is compared as in the older layout
        assert f"{read}; 10 of 100 answers differ from the lmms file's own extraction" in said
        assert "10 of 100 answers differ" in said_before
    else:  # no resps: the filter kept the reply, so there is no extraction to compare (the reply is not one)
        assert f"{read} (lmms records no extraction of its own to compare)" in said


def test_a_current_lmms_eval_sample_of_several_replies_is_refused(peer_files, tmp_path):
    ws, files = peer_files
    line = json.loads(files["lmms"].read_text().splitlines()[0])
    twice = saved(dict(line, resps=[[line["resps"][0][0], "Yes, it is."]]))  # --repeats 2, one request
    assert twice["resps"] == [line["resps"][0][0], "Yes, it is."]
    path = _write(tmp_path / "peer-vlm", "20261102_100000_samples_contextcanvas.jsonl", [twice],
                  files["lmms"].with_name("20261102_100000_results.json"))
    made = run_cli(["report", "-w", str(ws), "--predictions", str(path)])
    assert made.exit_code == 2 and "'resps' holds 2 replies to this sample" in made.stderr, made.output
