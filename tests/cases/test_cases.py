"""Case validation (`cfkit cases validate`), the case id and image path rules, and `cfkit init`'s dataset check."""

from __future__ import annotations

import io
import json
import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from cfkit.cases import CASE_ID_PATTERN
from cfkit.dataset import check_cases, load_cases
from cfkit.errors import CaseError
from support.workspace import run_cli, tree_snapshot, write_workspace

YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]


def _case(**fields) -> dict:
    return {"id": "T001", "images": ["T001.png"], "question": "Suitable?", "options": YES_NO, "gold": "B",
            "yes_option": "A", "domain": "photo"} | fields


def _write_cases(ws: Path, *lines: dict | str | bytes) -> Path:
    path = ws / "data" / "cases.jsonl"
    data = b"".join((line if isinstance(line, bytes) else
                     (line if isinstance(line, str) else json.dumps(line)).encode()) + b"\n" for line in lines)
    path.write_bytes(data)
    return path


def _cases_of(ws: Path) -> list[dict]:
    return [json.loads(line) for line in (ws / "data" / "cases.jsonl").read_text().splitlines()]


# ── one pass over every problem ───────────────────────────────────────────────


def test_five_different_errors_are_five_lines_in_one_run(tiny_ws: Path):
    good = _cases_of(tiny_ws)
    _write_cases(
        tiny_ws,
        good[0],
        '{"id": "T010", "images": ["T001.png"',                      # 2: not JSON
        _case(id="T011", gold="Z"),                                  # 3: gold not an option
        _case(id="T012", mood="calm"),                               # 4: unknown field
        good[0],                                                     # 5: duplicate id
        _case(id="T013", images=["T404.png"]),                       # 6: image missing
    )
    before = tree_snapshot(tiny_ws)
    result = run_cli(["cases", "validate", "-w", str(tiny_ws)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 5, result.stderr
    where = [line.split(": ", 2)[1] for line in lines]
    assert [w.rsplit(":", 1)[1] for w in where] == ["2", "3", "4", "5", "6"]
    for line, fragment in zip(lines, ["not valid JSON", "gold 'Z' is not among the option ids",
                                      "unknown field 'mood'", "duplicate case id 'T001' (first on line 1)",
                                      "image 'T404.png' not found"]):
        assert line.startswith("error: ") and "cases.jsonl:" in line and fragment in line, line
    assert "result         5 problems" in result.stdout  # the summary still describes the valid cases
    assert "Traceback" not in result.output
    assert tree_snapshot(tiny_ws) == before


def test_load_cases_raises_the_first_problem_and_counts_the_rest(tiny_ws: Path):
    path = _write_cases(tiny_ws, _case(gold="Z"), _case(id="T002", mood="x"), _case(id="T003", gold="Q"))
    with pytest.raises(CaseError) as info:
        load_cases(path, tiny_ws / "data" / "images")
    message = str(info.value)
    assert message.startswith(f"{path}:1: ") and "gold 'Z'" in message
    assert "(2 more problems; 'cfkit cases validate' lists them all.)" in message


def test_summary_of_a_valid_dataset(tiny_ws: Path):
    # The tiny workspace: T001 (Yes/No, gold No), T002 (Yes/No, gold Yes), T003 (three options), one image each.
    # Add a paired-image case whose gold is No and whose domain differs.
    cases = _cases_of(tiny_ws) + [_case(id="T004", images=["T001.png", "T002.png"], domain="painting")]
    _write_cases(tiny_ws, *cases)
    result = run_cli(["cases", "validate", "--json", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["problems"] == []
    summary = report["summary"]
    # Counted by hand from the four records above.
    assert summary == {"cases": 4, "two_option": 3, "three_option": 1, "more_options": 0, "paired_image": 1,
                       "binary": 3, "gold_yes": 1, "gold_yes_rate": pytest.approx(100 / 3), "images": 3,
                       "images_found": 3, "images_missing": 0, "domains": {"photo": 3, "painting": 1}}
    text = run_cli(["cases", "validate", "-w", str(tiny_ws)])
    assert text.exit_code == 0 and text.stderr == ""
    assert "gold Yes       33.33% (1 of 3 Yes/No cases)" in text.stdout
    assert "paired images  1 case with two images" in text.stdout
    assert "result         ok" in text.stdout


def test_validate_a_file_outside_any_workspace(tmp_path: Path, monkeypatch):
    ws = write_workspace(tmp_path / "ws")
    monkeypatch.chdir(tmp_path)
    result = run_cli(["cases", "validate", "--cases", str(ws / "data" / "cases.jsonl")])
    assert result.exit_code == 0, result.output
    assert "3 named, not checked (give --images DIR)" in result.stdout


def test_terminal_view_is_a_table_with_colour(tiny_ws: Path, monkeypatch):
    import cfkit.cli.cases as view

    _write_cases(tiny_ws, _case(gold="Z"), _case(id="T002", images=["T404.png"]))
    check = check_cases(tiny_ws / "data" / "cases.jsonl", tiny_ws / "data" / "images")
    out = Console(width=200, force_terminal=True, color_system="standard", record=True, file=io.StringIO())
    err = Console(width=200, force_terminal=True, color_system="standard", record=True, file=io.StringIO())
    monkeypatch.setattr(view, "out", out)
    monkeypatch.setattr(view, "err", err)
    view.render_check(check)
    problems = err.export_text(styles=True, clear=False)
    assert "2 problems" in problems and "\x1b[1;31m" in problems  # bold red title
    plain = err.export_text()
    assert "┃ where" in plain and "problem and fix" in plain and "gold 'Z' is not among" in plain
    summary = out.export_text(styles=True)
    assert "\x1b[31m1 missing\x1b[0m" in summary and "\x1b[31m2 problems\x1b[0m" in summary


# ── hostile ids, image paths and files: one line, exit 2, nothing changed ────


def _id_traversal(ws: Path) -> None:
    _write_cases(ws, _case(id="../../x"))


def _id_non_ascii_digits(ws: Path) -> None:
    _write_cases(ws, _case(id="T\u0661\u0662"))  # Arabic-Indic digits


def _id_with_control(ws: Path) -> None:
    _write_cases(ws, _case(id="T\x1b[31m"))


def _image_absolute(ws: Path) -> None:
    _write_cases(ws, _case(images=["/etc/passwd"]))


def _image_dotdot(ws: Path) -> None:
    _write_cases(ws, _case(images=["../../secret.png"]))


def _image_backslash(ws: Path) -> None:
    _write_cases(ws, _case(images=["..\\..\\secret.png"]))


def _image_drive(ws: Path) -> None:
    _write_cases(ws, _case(images=["C:/secret.png"]))


def _image_url(ws: Path) -> None:
    _write_cases(ws, _case(images=["https://example.org/photo.png"]))


def _image_symlink_out(ws: Path) -> None:
    (ws / "outside.png").write_bytes((ws / "data" / "images" / "T001.png").read_bytes())
    os.symlink(ws / "outside.png", ws / "data" / "images" / "link.png")
    _write_cases(ws, _case(images=["link.png"]))


def _cases_is_a_folder(ws: Path) -> None:
    (ws / "data" / "cases.jsonl").unlink()
    (ws / "data" / "cases.jsonl").mkdir()


def _cases_not_utf8(ws: Path) -> None:
    _write_cases(ws, json.dumps(_case(question="Caf\u00e9?"), ensure_ascii=False).encode("latin-1"))


def _cases_utf16(ws: Path) -> None:
    (ws / "data" / "cases.jsonl").write_bytes((json.dumps(_case()) + "\n").encode("utf-16"))


def _cases_deeply_nested(ws: Path) -> None:
    _write_cases(ws, '{"id": "T001", "provenance": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _duplicate_key(ws: Path) -> None:
    _write_cases(ws, json.dumps(_case())[:-1] + ', "gold": "A"}')


HOSTILE = [
    (_id_traversal, "cases.jsonl:1", "case id '../../x' is not allowed"),
    (_id_non_ascii_digits, "cases.jsonl:1", "case id 'T١٢' is not allowed"),
    (_id_with_control, "cases.jsonl:1", "case id 'T\\x1b[31m' is not allowed"),
    (_image_absolute, "cases.jsonl:1", "case 'T001': image path '/etc/passwd' is absolute"),
    (_image_dotdot, "cases.jsonl:1", "case 'T001': image path '../../secret.png' contains '..'"),
    (_image_backslash, "cases.jsonl:1", "contains '\\'"),
    (_image_drive, "cases.jsonl:1", "'C:/secret.png' is absolute"),
    (_image_url, "cases.jsonl:1", "image path 'https://example.org/photo.png' is a URL; cfkit reads image files"),
    (_image_symlink_out, "cases.jsonl:1", "case 'T001': image 'link.png' resolves to"),
    (_cases_is_a_folder, "cases.jsonl", "is a folder"),
    (_cases_not_utf8, "cases.jsonl:1", "not UTF-8 (byte 0xe9"),
    (_cases_utf16, "cases.jsonl", "UTF-16"),
    (_cases_deeply_nested, "cases.jsonl:1", "nested too deeply"),
    (_duplicate_key, "cases.jsonl:1", "key 'gold' appears twice"),
]


@pytest.mark.parametrize("command", [["cases", "validate"], ["probe", "run", "-m", "baseline:always-no",
                                                              "-s", "contextcanvas"]],
                         ids=["cases-validate", "probe-run"])
@pytest.mark.parametrize("break_it, where, what", HOSTILE, ids=[h[0].__name__.strip("_") for h in HOSTILE])
def test_hostile_case_files_are_one_line_and_change_nothing(tmp_path: Path, break_it, where, what, command):
    ws = write_workspace(tmp_path / "ws")
    break_it(ws)
    before = tree_snapshot(tmp_path)
    result = run_cli([*command, "-w", str(ws)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert where in lines[0] and what in lines[0], lines[0]
    assert "\x1b" not in result.stderr
    after = tree_snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before
    assert all(k.startswith("ws/.cfkit/") for k in set(after) - set(before)), set(after) - set(before)


def test_a_utf8_bom_is_accepted(tiny_ws: Path):
    path = tiny_ws / "data" / "cases.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = run_cli(["cases", "validate", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    assert load_cases(path, tiny_ws / "data" / "images").ids == ["T001", "T002", "T003"]


def test_a_symlink_inside_the_root_is_fine(tiny_ws: Path):
    images = tiny_ws / "data" / "images"
    (images / "sub").mkdir()
    os.symlink(images / "T001.png", images / "sub" / "alias.png")
    _write_cases(tiny_ws, _case(images=["sub/alias.png"]))
    assert check_cases(tiny_ws / "data" / "cases.jsonl", images).ok


@pytest.mark.parametrize("name, link_from, link_to", [
    ("link.png", "link.png", "outside"),  # a plain file name that is a link out of the root
    ("sub/link.png", "sub/link.png", "outside"),  # the same one folder down
    ("away/T001.png", "away", "outside-folder"),  # a folder that is a link out of the root
])
def test_load_cases_refuses_every_image_that_resolves_outside_the_root(tiny_ws: Path, name, link_from, link_to):
    """Reading cases without opening images (a report, a probe plan) still follows links out of the root."""
    images = tiny_ws / "data" / "images"
    (tiny_ws / "outside-folder").mkdir()
    (tiny_ws / "outside-folder" / "T001.png").write_bytes((images / "T001.png").read_bytes())
    (tiny_ws / "outside").write_bytes((images / "T001.png").read_bytes())
    (images / "sub").mkdir()
    os.symlink(tiny_ws / link_to, images / link_from)
    _write_cases(tiny_ws, _case(images=[name]))
    with pytest.raises(CaseError, match=f"image '{name}' resolves to .*outside the image root"):
        load_cases(tiny_ws / "data" / "cases.jsonl", images)


def test_load_cases_accepts_plain_names_under_a_linked_image_root(tiny_ws: Path):
    """An image root reached through a link holds its plain file names: they resolve inside it."""
    os.symlink(tiny_ws / "data" / "images", tiny_ws / "linked-images")
    _write_cases(tiny_ws, _case(images=["T001.png"]))
    assert load_cases(tiny_ws / "data" / "cases.jsonl", tiny_ws / "linked-images").ids == ["T001"]


@pytest.mark.parametrize("value, ok", [("HB084", True), ("cf-01.a_2", True), ("9", True), ("x" * 64, True),
                                       ("x" * 65, False), (".hidden", False), ("a/b", False), ("", False),
                                       ("HB084\n", False), ("é1", False)])
def test_case_id_pattern(value: str, ok: bool):
    import re

    assert bool(re.fullmatch(CASE_ID_PATTERN, value)) is ok
    from cfkit.cases import check_case_id

    if ok:
        assert check_case_id(value) == value
    else:
        with pytest.raises(CaseError, match="is not allowed"):
            check_case_id(value)


# ── init checks the dataset it is given ───────────────────────────────────────


def test_init_with_a_missing_cases_file_exits_2_and_writes_nothing(tmp_path: Path):
    target = tmp_path / "study"
    result = run_cli(["init", str(target), "--cases", str(tmp_path / "nope" / "cases.jsonl")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope/cases.jsonl not found" in lines[0] and "--no-check" in lines[0]
    assert "ready" not in result.output.lower()
    assert not target.exists()


def test_init_with_dataset_problems_lists_them_and_writes_nothing(tmp_path: Path):
    data = write_workspace(tmp_path / "data")
    (data / "data" / "images" / "T002.png").unlink()
    target = tmp_path / "study"
    target.mkdir()  # an existing, empty folder is kept as it was
    result = run_cli(["init", str(target), "--cases", str(data / "data" / "cases.jsonl"),
                      "--images", str(data / "data" / "images")])
    assert result.exit_code == 2
    assert "image 'T002.png' not found" in result.stderr and "nothing was written" in result.stderr
    assert "2 of 3 found" in result.stdout and "ready" not in result.output.lower()
    assert list(target.iterdir()) == []


def test_init_with_a_good_dataset_prints_the_summary(tmp_path: Path):
    data = write_workspace(tmp_path / "data")
    target = tmp_path / "study"
    result = run_cli(["init", str(target), "--cases", str(data / "data" / "cases.jsonl"),
                      "--images", str(data / "data" / "images")])
    assert result.exit_code == 0, result.output
    assert "cases          3 in" in result.stdout and "3 of 3 found" in result.stdout
    assert "Workspace ready" in result.stdout
    ok = run_cli(["cases", "validate", "-w", str(target)])
    assert ok.exit_code == 0, ok.output


def test_init_no_check_makes_the_workspace_for_data_to_come(tmp_path: Path):
    target = tmp_path / "study"
    result = run_cli(["init", str(target), "--no-check"])
    assert result.exit_code == 0, result.output
    assert "dataset not checked" in result.stdout and "cfkit cases validate" in result.stderr
    assert (target / "cfkit.toml").is_file()
    later = run_cli(["cases", "validate", "-w", str(target)])
    assert later.exit_code == 2 and "not found" in later.stderr


# ── cfkit.toml is written through a TOML string writer ────────────────────────


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1).filter(lambda s: s.strip()))
def test_toml_string_round_trips_any_text(value: str):
    from cfkit.workspace import toml_string

    assert tomllib.loads(f"v = {toml_string(value)}\n")["v"] == value


@pytest.mark.parametrize("path", ["C:\\data\\cases.jsonl", "\\\\server\\share\\cases.jsonl", "it's/cases.jsonl",
                                  'say "hi"/cases.jsonl', "a'''b\"\"\"c", "tab\there", "new\nline", "esc\x1b[31m",
                                  "del\x7f", "ünïcødé/数据.jsonl", "x # not a comment", "trailing\\"])
def test_init_writes_hostile_paths_that_read_back_unchanged(tmp_path: Path, path: str):
    target = tmp_path / "study"
    result = run_cli(["init", str(target), "--cases", path, "--images", path + "-images", "--no-check"])
    assert result.exit_code == 0, result.output
    from cfkit.workspace import load_workspace

    config = load_workspace(target).config
    assert config.dataset.cases == path and config.dataset.images == path + "-images"


def _surrogate(tmp: Path) -> list[str]:
    return ["init", str(tmp / "study"), "--cases", "bad\udcffname.jsonl", "--no-check"]


def _empty_cases(tmp: Path) -> list[str]:
    return ["init", str(tmp / "study"), "--cases", " ", "--no-check"]


def _dir_is_a_file(tmp: Path) -> list[str]:
    (tmp / "study").write_text("not a folder")
    return ["init", str(tmp / "study"), "--no-check"]


def _config_exists(tmp: Path) -> list[str]:
    (tmp / "study").mkdir()
    (tmp / "study" / "cfkit.toml").write_text("# mine\n")
    return ["init", str(tmp / "study"), "--no-check"]


@pytest.mark.parametrize("make, what", [(_surrogate, "is not valid Unicode"), (_empty_cases, "--cases is empty"),
                                        (_dir_is_a_file, "is a file, not a folder"),
                                        (_config_exists, "already exists")],
                         ids=["surrogate", "empty", "file", "exists"])
def test_init_refuses_bad_config_values_in_one_line_and_leaves_nothing(tmp_path: Path, make, what: str):
    args = make(tmp_path)
    before = tree_snapshot(tmp_path)
    dirs_before = sorted(p for p in tmp_path.rglob("*"))
    result = run_cli(args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], result.stderr
    assert tree_snapshot(tmp_path) == before and sorted(tmp_path.rglob("*")) == dirs_before


def test_init_removes_the_folders_it_made_when_writing_fails(tmp_path: Path):
    import resource
    import signal
    import subprocess
    import sys

    def small_files_only() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # cfkit.toml is larger than 64 bytes

    done = subprocess.run([sys.executable, "-m", "cfkit", "init", str(tmp_path / "a" / "study"), "--no-check"],
                          capture_output=True, text=True, preexec_fn=small_files_only, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot make the workspace" in lines[0], done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("line", ['{"a": 1, "a": 2}', '{"x": {"k": 1, "j": 2, "k": 3}}', '\ufeff{"a": 1}', '{bad',
                                  '[1, {"a": 1}]', '{"a": [{"b": 1}, {"b": 2, "c": 3}]}', '{}', '"text"'])
def test_a_line_reads_as_json_loads_reads_it_with_every_repeated_key_refused(line):
    """The cases file's lines go through one decoder made once (not one json.loads each): what it reads, and what
    it refuses, is what json.loads with a hook refusing repeated keys reads and refuses."""
    import json

    from cfkit.dataset import _decode_line

    def hook(pairs):
        keys = [k for k, _ in pairs]
        repeated = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if repeated is not None:
            raise KeyError(repeated)
        return dict(pairs)

    record, problem = _decode_line(line.encode(), "cases.jsonl", 2)
    try:
        expected = json.loads(line, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        assert record is None and problem.message == (f"not valid JSON ({exc.msg} at column {exc.colno}); write one "
                                                       "JSON object a line.")
        return
    except KeyError as exc:
        assert record is None and problem.message == f"key '{exc.args[0]}' appears twice in one record; keep one."
        return
    if isinstance(expected, dict):
        assert (record, problem) == (expected, None)
    else:
        assert record is None and problem.message == "expected a JSON object per line."
