"""What the everyday commands import: each path may load only the libraries it uses.

A whole process runs the command (as a user's shell would) and prints the
third-party packages found in ``sys.modules`` afterwards; each path has a fixed
allowance. scipy.stats alone costs a report seconds of start-up on a small
machine, Pillow and the HTTP stack belong to the probe, not to reading results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLICK_RICH = {"cfkit", "click", "rich"}
PYDANTIC = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"}

PROBE = ("import json, sys\nfrom cfkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
         "    code = exc.code\nthird = sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)\n"
         "               - {'__main__', 'cython_runtime'})\n"
         "print('IMPORTED', json.dumps([m for m in third if not m.startswith('_')]), code, file=sys.stderr)\n")


def _imported(args: list[str]) -> tuple[set[str], object]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    line = [x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, done.stderr
    listed, code = line[-1][len("IMPORTED "):].rsplit(" ", 1)
    return set(json.loads(listed)), code


def test_help_imports_only_click_and_rich():
    imported, code = _imported(["--help"])
    assert code == "0"
    assert imported <= CLICK_RICH, imported - CLICK_RICH


def test_runs_list_imports_no_numpy_images_or_http(tiny_ws):
    imported, code = _imported(["-w", str(tiny_ws), "runs", "list"])
    assert code == "0"
    assert imported <= CLICK_RICH | PYDANTIC, imported - CLICK_RICH - PYDANTIC


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_report_imports_numpy_and_yaml_but_not_scipy_images_or_http(tiny_ws, tmp_path, fmt):
    lines = [{"model": "m", "suite": "contextcanvas", "case": case, "pair": None, "condition": "image",
              "answer": answer, "parse": "json", "error": None, "raw": answer, "reason": None, "confidence": None}
             for case, answer in (("T001", "B"), ("T002", "B"), ("T003", "C"))]
    # The modality suite too, with answers that change between conditions: its deltas carry McNemar tests.
    lines += [{**line, "suite": "modality", "condition": condition,
               "answer": "A" if condition == "text" else line["answer"]}
              for condition in ("text", "neutral", "evidence", "image") for line in lines[:3]]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    imported, code = _imported(["-w", str(tiny_ws), "report", "--predictions", str(predictions), "--all-cases",
                                "--resamples", "50", "--format", fmt])
    assert code in ("0", "1")
    allowed = CLICK_RICH | PYDANTIC | {"numpy", "yaml"}  # yaml: the workspace's specs say which pairs exist
    assert imported <= allowed, imported - allowed


def test_report_json_reads_back_equal_to_the_standard_encoder():
    from cfkit.report.exports import indented_json

    data = {"models": [{"name": "m", "rows": [{"acc": 0.5, "ci": [0.1, 0.9], "note": "é \u2028 \"q\""}],
                        "empty": [], "nested": {"a": {}, "b": [[1, 2], [3, {"x": None}]]}}],
            1: True, False: {"k": [1]}, None: [{}], 2.5: "x", "nan": float("nan"), "tuple": (1, (2, 3))}
    text = indented_json(data)
    assert json.dumps(json.loads(text)) == json.dumps(data)  # NaN != NaN, so compared as re-encoded text
    assert text.splitlines()[1] == '  "models": ['  # the nesting is indented two spaces a level
    lines = text.splitlines()
    assert lines[2].startswith('    {"name": "m", "rows": [{"acc": 0.5, "ci": [0.1, 0.9]')  # a list's element: one line
    assert lines[-4:] == ["    1,", "    [2, 3]", "  ]", "}"]
