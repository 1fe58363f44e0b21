"""What the everyday commands import: each path may load only the libraries it uses.

A whole process runs the command (as a user's shell would) and prints the
third-party packages found in ``sys.modules`` afterwards; each path has a fixed
allowance. scipy.stats alone costs a report seconds of start-up on a small
machine, Pillow and the HTTP stack belong to the probe, not to reading results.
"""

from __future__ import annotations

import json
import os
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
         "print('IMPORTED', json.dumps([m for m in third if not m.startswith('_')]), code, file=sys.stderr)\n"
         "print('CFKIT', json.dumps(sorted(m for m in sys.modules if m.startswith('cfkit'))), file=sys.stderr)\n")


def _run(args: list[str]) -> tuple[set[str], object, set[str]]:
    """The third-party packages, the exit status and cfkit's own modules of ``cfkit ARGS``."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    line = [x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, done.stderr
    listed, code = line[-1][len("IMPORTED "):].rsplit(" ", 1)
    own = [x for x in done.stderr.splitlines() if x.startswith("CFKIT ")]
    return set(json.loads(listed)), code, set(json.loads(own[-1][len("CFKIT "):]))


def _imported(args: list[str]) -> tuple[set[str], object]:
    imported, code, _own = _run(args)
    return imported, code


def test_help_imports_only_click_and_no_command_module():
    imported, code, own = _run(["--help"])
    assert code == "0"
    assert imported <= {"cfkit", "click"}, imported - {"cfkit", "click"}  # not even Rich: Click draws the help
    allowed = {"cfkit", "cfkit.cli", "cfkit.cli.once", "cfkit.errors"}
    assert own <= allowed, own - allowed  # the command list comes from SUMMARIES, no command module is loaded


def test_help_lists_each_command_with_its_own_summary():
    """SUMMARIES (what --help prints without importing a command) says what each command's help says."""
    import click

    from cfkit.cli import COMMANDS, SUMMARIES, cli

    ctx = click.Context(cli)
    assert set(SUMMARIES) == set(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert not command.hidden and not command.deprecated
        assert SUMMARIES[name] == command.get_short_help_str(10_000), name


def test_help_lists_a_command_without_a_summary_from_its_module(monkeypatch):
    """A command added to COMMANDS but not to SUMMARIES is still listed, with the summary its module gives."""
    from click.testing import CliRunner

    from cfkit import cli as cli_module

    monkeypatch.delitem(cli_module.SUMMARIES, "runs")
    result = CliRunner().invoke(cli_module.cli, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "  runs      Stored probe runs: list, show, rm, export, import, reparse, unparsed." in result.output


def test_runs_list_imports_no_pydantic_numpy_images_or_http(tiny_ws):
    imported, code, own = _run(["-w", str(tiny_ws), "runs", "list"])
    assert code == "0"
    assert imported <= CLICK_RICH, imported - CLICK_RICH  # cfkit.toml plainly right: read without pydantic
    assert not {m for m in own if m.startswith("cfkit.store")}, own  # no store yet: nothing to open


def test_a_workspace_file_that_needs_the_full_check_still_gets_it(tiny_ws):
    """A value pydantic converts ("12" pairs) is read by the full check, which only then is imported."""
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[check]\nmargin = "3"\n')
    imported, code = _imported(["-w", str(tiny_ws), "runs", "list"])
    assert code == "0" and "pydantic" in imported
    config.write_text(config.read_text().replace('margin = "3"', "margin = -3"))
    done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "runs", "list"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "check.margin" in done.stderr and "greater than or equal to 0" in done.stderr, done.stderr


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
    imported, code, own = _run(["-w", str(tiny_ws), "report", "--predictions", str(predictions), "--all-cases",
                                "--resamples", "50", "--format", fmt])
    assert code in ("0", "1")
    # yaml: the workspace's specs say which pairs exist; orjson: the predictions file's JSON, where installed
    allowed = CLICK_RICH | PYDANTIC | {"numpy", "yaml", "orjson"}
    assert imported <= allowed, imported - allowed
    # The EGA section's modules (and the audit's behind them) load only for --ega; the others are never its work.
    assert not {m for m in own if m.startswith(NOT_ON_THE_REPORT_PATH)}, own


def _lines(**extra) -> str:
    lines = [{"model": "m", "suite": "contextcanvas", "case": case, "pair": None, "condition": "image",
              "answer": answer, "parse": "json", "error": None, "raw": answer, "reason": None, "confidence": None}
             for case, answer in (("T001", "B"), ("T002", "B"), ("T003", "C"))]
    lines[-1].update(extra)
    return "".join(json.dumps(line) + "\n" for line in lines)


#: The full checks (pydantic) of the cases, the predictions, the specs and cfkit.toml, for inputs not plainly right.
FULL_CHECKS = ("cfkit.cases_schema", "cfkit.predictions_schema", "cfkit.specs", "cfkit.workspace_schema")


@pytest.mark.parametrize("source", ["predictions", "store"])
def test_a_report_over_plainly_right_inputs_imports_no_pydantic(tiny_ws, tmp_path, source):
    """Issue 34: cases, predictions (a file or stored runs) and cfkit.toml all plainly right, and no spec: a report
    reads them without pydantic (cfkit.cases.plain_case, cfkit.predictions' column-wise checks)."""
    for spec in (tiny_ws / "interventions").glob("*.yaml"):
        spec.unlink()
    args = ["-w", str(tiny_ws), "report", "--resamples", "50", "--format", "json"]
    if source == "predictions":
        predictions = tmp_path / "p.jsonl"
        predictions.write_text(_lines())
        args += ["--predictions", str(predictions)]
    else:
        done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "probe", "run", "-m",
                               "baseline:always-no", "-s", "contextcanvas"], capture_output=True, text=True, cwd=REPO,
                              timeout=120)
        assert done.returncode == 0, done.stderr
    imported, code, own = _run(args)
    assert code == "0"
    allowed = CLICK_RICH | {"numpy", "orjson"}  # orjson: the predictions file's JSON, where installed
    assert imported <= allowed, imported - allowed
    assert not {m for m in own if m.startswith(FULL_CHECKS)}, own


def test_a_predictions_line_pydantic_would_convert_still_gets_the_full_check(tiny_ws, tmp_path):
    """A value the plain reading does not plainly accept (``truncated: 1``, which pydantic reads as true) sends the
    file to the line-by-line full check, which only then is imported, and the report is made from its reading."""
    for spec in (tiny_ws / "interventions").glob("*.yaml"):
        spec.unlink()
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(_lines(truncated=1))
    args = ["-w", str(tiny_ws), "report", "--predictions", str(predictions), "--resamples", "50", "--format", "json"]
    imported, code, own = _run(args)
    assert code == "0" and "pydantic" in imported and "cfkit.predictions_schema" in own
    done = subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert [row["model"] for row in json.loads(done.stdout)["contextcanvas"]] == ["m"]


#: cfkit's own modules a report over cfkit's predictions files never needs: the probe package and its backends
#: (a report reads the swap suite's rules from cfkit.swap), the parser's rules (predictions carry their reading),
#: the other harnesses' readers and writers, the EGA section, the figures, and the edit and check rooms.
NOT_ON_THE_REPORT_PATH = ("cfkit.probe", "cfkit.backends", "cfkit.parse.decision", "cfkit.parse.prose",
                          "cfkit.parse.fields", "cfkit.interop.mapping", "cfkit.interop.tables",
                          "cfkit.interop.records", "cfkit.audit", "cfkit.report.grounding", "cfkit.report.plots",
                          "cfkit.judge", "cfkit.edit", "cfkit.preserve", "cfkit.masks", "cfkit.editors")


def test_report_on_a_stored_run_imports_neither_the_probe_nor_scipy(tiny_ws):
    """A report read from the store (the default) stays off the probe package and scipy.stats too."""
    done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "probe", "run", "-m",
                           "baseline:always-no", "-s", "contextcanvas"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    imported, code, own = _run(["-w", str(tiny_ws), "report", "--format", "json"])
    assert code in ("0", "1")
    allowed = CLICK_RICH | PYDANTIC | {"numpy", "yaml"}
    assert imported <= allowed, imported - allowed
    assert not {m for m in own if m.startswith(NOT_ON_THE_REPORT_PATH)}, own


def test_runs_list_on_a_store_imports_no_probe_statistics_or_report_tables(tiny_ws):
    """Which run the report reads and which answers are stale come from the report's own rooms
    (cfkit.report.standing), which the package loads alone: not its statistics, tables or numpy."""
    done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "probe", "run", "-m",
                           "baseline:always-no", "-s", "contextcanvas"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    imported, code, own = _run(["-w", str(tiny_ws), "runs", "list"])
    assert code == "0"
    allowed = CLICK_RICH | {"yaml"}  # (the probe templates and captions an answer's staleness is checked against)
    assert imported <= allowed, imported - allowed
    assert "cfkit.report.standing" in own, own
    assert not {m for m in own if m.startswith(("cfkit.probe", "cfkit.backends", "cfkit.stats", "cfkit.report.build",
                                                "cfkit.report.rows", "cfkit.report.tables", "cfkit.report.units",
                                                "cfkit.report.exports", "cfkit.parse.decision"))}, own


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


def test_a_json_report_with_nothing_to_warn_draws_nothing_and_imports_no_rich(tiny_ws, tmp_path):
    """Rich loads where something is drawn: JSON written straight to stdout, with no warning, needs none of it."""
    lines = [{"model": "m", "suite": "contextcanvas", "case": case, "pair": None, "condition": "image",
              "answer": "A", "parse": "json", "error": None, "raw": "A", "reason": None, "confidence": None}
             for case in ("T001", "T002", "T003")]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["-w", str(tiny_ws), "report", "--predictions", str(predictions), "--resamples", "50", "--format", "json"]
    done = subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)["contextcanvas"][0]["model"] == "m"
    imported, code, _own = _run(args)
    assert code == "0"
    assert "rich" not in imported, imported
    # The same report as tables draws them, with Rich.
    imported, code, _own = _run(args[:-1] + ["table"])
    assert code == "0" and "rich" in imported


@pytest.mark.parametrize("package", ["cfkit.interop", "cfkit.parse", "cfkit.probe", "cfkit.report"])
def test_every_name_a_lazy_package_offers_resolves_to_its_module_s_object(package):
    """A package that names its rooms' objects lazily gives each one (a wrong entry in its table would only fail
    when some command first asks for it), and refuses a name it does not have."""
    import importlib

    module = importlib.import_module(package)
    for name, room in module._LAZY.items():
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{room}"), name), name
    assert set(module._LAZY) <= set(module.__all__)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        getattr(module, "no_such_name")


#: What a probe run's HTTP client brings along (aiohttp and its own dependencies, orjson for the bodies, pybase64
#: for the images).
HTTP = {"aiohttp", "aiohappyeyeballs", "aiosignal", "attr", "frozenlist", "idna", "multidict", "orjson", "propcache",
        "pybase64", "yarl"}


def test_a_first_probe_run_over_png_and_jpeg_images_imports_no_pillow_or_numpy(tiny_ws):
    """Send while planning (issue 34): before the first request each image's header and end are checked
    without Pillow (cfkit.probe.header_checks), and the images are sent as they are, so a first run over PNG and
    JPEG files never loads Pillow or numpy."""
    import io

    from PIL import Image

    from support.chat_api_server import ChatServer
    from support.probe_runs import scripted_answer
    from support.workspace import gradient_image

    buffer = io.BytesIO()
    Image.fromarray(gradient_image(96, 64, 5)).save(buffer, "JPEG")
    jpeg = tiny_ws / "data" / "images" / "T002.jpg"
    jpeg.write_bytes(buffer.getvalue())
    cases = tiny_ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("T002.png", "T002.jpg"))
    with ChatServer(scripted_answer) as server:
        imported, code, _own = _run(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s",
                                     "contextcanvas", "--base-url", server.url, "--json"])
        assert server.count == 3
    assert code == "0"
    allowed = CLICK_RICH | PYDANTIC | HTTP
    assert imported <= allowed, imported - allowed


#: cfkit's own modules the same command again on a finished run never needs (cfkit.probe.shortcut answers it):
#: no backend, no options model, no protocol preset, no steps of a run, no prices, no plan, no identity of
#: requests, no sending.
NOT_ON_THE_RERUN_PATH = ("cfkit.backends", "cfkit.probe.protocol", "cfkit.probe.identity", "cfkit.probe.job",
                         "cfkit.probe.prices",
                         "cfkit.probe.plan", "cfkit.probe.runner", "cfkit.probe.sending", "cfkit.probe.image_refs",
                         "cfkit.dataset", "cfkit.cases", "cfkit.registry", "cfkit.images", "cfkit.subsets", "cfkit.files")


def test_a_fully_cached_rerun_imports_only_click_and_the_store(tmp_path):
    """Issue 34: the identical ``probe run`` again on a finished run loads neither pydantic (the backend's options,
    the protocol preset) nor the HTTP client nor any image library; only Click and the store. Not Rich either:
    with stderr not a terminal its bar is one line, written as Rich would write it (cfkit.cli.progress_bar)."""
    from support.chat_api_server import ChatServer
    from support.probe_runs import many_cases, scripted_answer
    from support.workspace import aged

    ws = aged(many_cases(tmp_path / "ws", 3))
    args = ["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", "--json"]
    with ChatServer(scripted_answer) as server:
        first, code, own = _run([*args, "--base-url", server.url])
        assert code == "0" and "cfkit.backends.openai_chat" in own  # the first run builds its backend
        imported, code, own = _run([*args, "--base-url", server.url])
        assert server.count == 3  # the rerun sent nothing
    assert code == "0"
    assert imported <= {"cfkit", "click"}, imported - {"cfkit", "click"}
    assert not {m for m in own if m.startswith(NOT_ON_THE_RERUN_PATH)}, own


#: What a first ``probe run`` has imported when it starts sending, taken as the sender starts (the HTTP client
#: itself loads then, as the lean floor client's does).
BEFORE_SENDING = ("import json, os, sys\nif os.environ.get('ONE_CPU'):\n"
                  "    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
                  "import cfkit.probe.sending as sending\nseen = []\nstart = sending.Sender.send_all\n"
                  "async def send_all(self, *args, **kwargs):\n    seen.append(sorted(sys.modules))\n"
                  "    return await start(self, *args, **kwargs)\nsending.Sender.send_all = send_all\n"
                  "from cfkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
                  "    code = exc.code\n"
                  "print('BEFORE', json.dumps(seen[0]), code, file=sys.stderr)\n")

#: cfkit's own modules a contextcanvas run has no use for before its first request: the lines about unreviewed
#: inputs when there are none (and Rich, to say them), captions and specs (pydantic models built at import), the
#: counterfactual suite's rooms, the dry run's estimate, and the reply parser, its records and the lines about
#: troubled replies (a reply is read only once one has come back; the summary's lines come at the end); nor the
#: owners of the tables such a run never touches, though its new store creates them (from cfkit.store.tables).
NOT_BEFORE_THE_FIRST_REQUEST = ("cfkit.cli.probe_plan", "cfkit.captions", "cfkit.specs", "cfkit.probe.estimate",
                                "cfkit.edit", "cfkit.preserve", "cfkit.report", "cfkit.parse",
                                *(f"cfkit.store.{name}" for name in ("edits", "checks", "reviews", "audits",
                                                                     "audit_labels", "screens", "prelabels")))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
@pytest.mark.parametrize("cpus", ["one", "all"])
def test_what_a_first_probe_run_imports_before_its_first_request(tmp_path, cpus):
    """Issue 34: the path to the first request loads Click and cfkit's probe rooms; not pydantic (the openai
    backend's options and the model controls, none given, are read plainly: cfkit.options.PlainSpec), nor
    importlib.metadata (built-in backends load without the entry points; versions come from the .dist-info
    folders), nor Rich (nothing is drawn in a pipe before the end), nor the HTTP client on the run's own thread
    before the sender needs it (on one CPU nothing else imports it), and none of the rooms a contextcanvas run does
    not use. With more CPUs the HTTP client, and only it, is imported on a thread while the run plans."""
    from support.chat_api_server import ChatServer
    from support.probe_runs import many_cases, scripted_answer

    ws = many_cases(tmp_path / "ws", 3)
    env = {k: v for k, v in os.environ.items() if k != "ONE_CPU"} | ({"ONE_CPU": "1"} if cpus == "one" else {})
    with ChatServer(scripted_answer) as server:
        done = subprocess.run([sys.executable, "-c", BEFORE_SENDING, "-w", str(ws), "probe", "run", "-m",
                               "openai:test-model", "-s", "contextcanvas", "--base-url", server.url, "--json"],
                              capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
        assert server.count == 3
    line = [x for x in done.stderr.splitlines() if x.startswith("BEFORE ")]
    assert line, done.stderr
    listed, code = line[-1][len("BEFORE "):].rsplit(" ", 1)
    assert code == "None" or code == "0", done.stderr
    modules = set(json.loads(listed))
    third = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"__main__", "cython_runtime"}
    third = {m for m in third if not m.startswith("_")}
    allowed = {"cfkit", "click"} | (HTTP if cpus == "all" and len(os.sched_getaffinity(0)) > 1 else set())
    assert third <= allowed, third - allowed
    assert not {m for m in modules if m.startswith(NOT_BEFORE_THE_FIRST_REQUEST)}, modules
    assert "importlib.metadata" not in modules
    # The packaged prompt templates are read from the package's folder: importlib.resources (and the zipfile
    # module its first look-up loads) cost 10-15 ms of CPU before the first request.
    assert not {m for m in modules if m.startswith(("importlib.resources", "importlib.readers", "zipfile"))}, modules
    assert "csv" not in modules  # only CSV files need it


def test_a_report_leaves_numpy_ma_unloaded(tiny_ws, tmp_path):
    """The intervals' percentiles are cfkit's own (stats.bootstrap.row_percentiles): numpy.percentile and
    numpy.unique import numpy.ma, a fixed cost of every report."""
    for spec in (tiny_ws / "interventions").glob("*.yaml"):
        spec.unlink()
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(_lines())
    code = ("import sys\nfrom cfkit.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('MA', 'numpy.ma' in sys.modules, 'numpy' in sys.modules, code, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, "-w", str(tiny_ws), "report", "--predictions", str(predictions),
                           "--resamples", "50", "--format", "json"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert "MA False True 0" in done.stderr, done.stderr
