"""`cfkit cases import`: CSV, JSON, JSON Lines, Parquet and datasets folders to a cases.jsonl that validates."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from support.case_sources import IMAGES, ROWS, _json_rows
from support.workspace import gradient_image, run_cli, tree_snapshot

def _expected() -> list[dict]:
    """The cfkit records the rows above must become, written out by hand."""
    out = []
    for row in ROWS:
        options = [{"id": k[-1], "text": row[k]} for k in ("option_A", "option_B", "option_C") if row[k]]
        record = {"id": row["evaluation_id"], "images": IMAGES[row["evaluation_id"]], "question": row["question"],
                  "options": options, "gold": row["gold_option_id"]}
        if len(options) == 2:
            record["yes_option"] = "A"
        record |= {"rationale": row["rationale"], "domain": row["domain"],
                   "provenance": {"title": row["title"], "creator": row["creator"], "license": row["license"],
                                  "redistribution": row["rights"], "original_id": row["original_case_id"],
                                  "source_basis": row["source_basis"]}}
        out.append(record)
    return out


SUMMARY = {"cases": 4, "two_option": 3, "three_option": 1, "more_options": 0, "paired_image": 1, "binary": 3,
           "gold_yes": 1, "images": 5, "images_found": 5, "images_missing": 0,
           "domains": {"painting": 2, "photography": 2}}


def _png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(gradient_image(24, 16, seed)).save(buffer, format="PNG")
    return buffer.getvalue()


def _image_bytes() -> dict[str, list[bytes]]:
    return {case: [_png(i * 10 + k) for k in range(len(names))] for i, (case, names) in enumerate(IMAGES.items())}


def _put_images(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for case, blobs in _image_bytes().items():
        for name, data in zip(IMAGES[case], blobs):
            (root / name).write_bytes(data)


def _csv(path: Path) -> None:
    columns = list(ROWS[0]) + ["image_1", "image_2"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for row in ROWS:
            names = IMAGES[row["evaluation_id"]]
            writer.writerow(row | {"image_1": names[0], "image_2": names[1] if len(names) > 1 else ""})


def _json(path: Path) -> None:
    path.write_text(json.dumps({"cases": _json_rows()}))


def _jsonl(path: Path) -> None:
    path.write_text("\n".join(json.dumps(r) for r in _json_rows()) + "\n\n")


def _embedded_rows() -> list[dict]:
    blobs = _image_bytes()
    return [row | {"images": [{"bytes": b, "path": None} for b in blobs[row["evaluation_id"]]]} for row in ROWS]


def _parquet(path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (it comes with the dev extra)")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(_embedded_rows()), path)


def _datasets(path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (it comes with the dev extra)")
    rows = _embedded_rows()
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    features = datasets.Features({k: datasets.Value("string") for k in columns if k != "images"}
                                 | {"images": datasets.List(datasets.Image())})
    # The gold answer as a ClassLabel, the way many hub datasets store labels.
    features["gold_option_id"] = datasets.ClassLabel(names=["A", "B", "C"])
    columns["gold_option_id"] = [["A", "B", "C"].index(g) for g in columns["gold_option_id"]]
    datasets.Dataset.from_dict(columns, features=features).save_to_disk(str(path))


KINDS = [("csv", "cases.csv", _csv, False), ("json", "cases.json", _json, False),
         ("jsonl", "cases.jsonl", _jsonl, False), ("parquet", "cases.parquet", _parquet, True),
         ("datasets", "hf-export", _datasets, True)]


@pytest.mark.parametrize("kind, name, make, embedded", KINDS, ids=[k[0] for k in KINDS])
def test_import_round_trips_to_a_cases_file_that_validates(tmp_path: Path, kind, name, make, embedded):
    source = tmp_path / "src" / name
    source.parent.mkdir()
    make(source)
    images = tmp_path / "images"
    if not embedded:
        _put_images(images)
    target = tmp_path / "out" / "cases.jsonl"
    result = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(images), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["format"] == kind and report["ok"] and report["written"]
    assert report["ignored_columns"] == []
    written = [json.loads(line) for line in target.read_text().splitlines()]
    assert written == _expected()
    if embedded:  # the bytes landed under the image root, named by case id, unchanged
        blobs = _image_bytes()
        for case, names in IMAGES.items():
            for n, data in zip(names, blobs[case]):
                assert (images / n).read_bytes() == data
        assert sorted(Path(p).name for p in report["images_written"]) == sorted(n for v in IMAGES.values() for n in v)
    validate = run_cli(["cases", "validate", "--cases", str(target), "--images", str(images), "--json"])
    assert validate.exit_code == 0, validate.output
    summary = json.loads(validate.stdout)["summary"]
    assert summary == report["check"]["summary"]
    assert {k: v for k, v in summary.items() if k != "gold_yes_rate"} == SUMMARY
    assert summary["gold_yes_rate"] == pytest.approx(100 / 3)


def test_text_output_names_the_mapping_and_the_next_step(tmp_path: Path):
    source = tmp_path / "cases.csv"
    _csv(source)
    _put_images(tmp_path / "images")
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "cases.jsonl"),
                      "--images", str(tmp_path / "images")])
    assert result.exit_code == 0, result.output
    assert "id <- evaluation_id" in result.stderr and "options <- option_A, option_B, option_C" in result.stderr
    assert "Wrote 4 cases to" in result.stderr and "cfkit init DIR --cases" in result.stderr
    assert "result         ok" in result.stdout


def test_an_ambiguous_mapping_is_refused_with_the_candidates(tmp_path: Path):
    rows = [dict(r, id=r["evaluation_id"].lower()) for r in _json_rows()]
    source = tmp_path / "cases.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows))
    _put_images(tmp_path / "images")
    target = tmp_path / "out.jsonl"
    before = tree_snapshot(tmp_path)
    result = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(tmp_path / "images")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "field 'id' could come from the columns 'id', 'evaluation_id'" in lines[0]
    assert "--map id=COLUMN" in lines[0]
    assert tree_snapshot(tmp_path) == before
    chosen = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(tmp_path / "images"),
                      "--map", "id=evaluation_id", "--json"])
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout)["ignored_columns"] == ["id"]  # said, not silently dropped
    assert [json.loads(line)["id"] for line in target.read_text().splitlines()] == ["CC001", "CC002", "CC003", "CC004"]


def test_a_missing_field_lists_the_unmapped_columns(tmp_path: Path):
    source = tmp_path / "cases.json"
    source.write_text(json.dumps([{"key": "CC001", "q": "Fine?", "options": ["Yes", "No"], "gold": "A",
                                   "image": "a.png"}]))
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2
    assert "no column for 'id', 'question'" in result.stderr and "'key', 'q'" in result.stderr
    mapped = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl"),
                      "--map", "id=key", "--map", "question=q", "--json"])
    assert mapped.exit_code == 0, mapped.output
    record = json.loads((tmp_path / "out.jsonl").read_text())
    assert record == {"id": "CC001", "images": ["a.png"], "question": "Fine?", "gold": "A", "yes_option": "A",
                      "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]}
    assert json.loads(mapped.stdout)["check"]["summary"]["images_found"] is None  # no --images: not checked


@pytest.mark.parametrize("entry, what", [("colour=x", "unknown field 'colour'"), ("id", "is not FIELD=COLUMN"),
                                         ("id=evalution_id", "Did you mean 'evaluation_id'"),
                                         ("question=question,title", "only options and images take several")])
def test_bad_map_entries_are_one_line(tmp_path: Path, entry: str, what: str):
    source = tmp_path / "cases.csv"
    _csv(source)
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl"), "--map", entry])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_every_bad_row_is_reported_and_nothing_is_written(tmp_path: Path):
    rows = [dict(r) for r in ROWS]
    rows[0]["gold_option_text"] = "Yes"          # row 1: gold id and text disagree
    rows[1]["evaluation_id"] = "../../x"         # row 2: an id that would be a path
    rows[2]["gold_option_id"] = "D"              # row 3: gold not an option
    rows[3]["evaluation_id"] = "CC001"           # row 4: duplicate id
    source = tmp_path / "cases.csv"
    with source.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]) + ["image"])
        writer.writeheader()
        writer.writerows(r | {"image": "x.png"} for r in rows)
    before = tree_snapshot(tmp_path)
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 5, result.stderr  # one per row, then what happened
    for line, (row, fragment) in zip(lines, [(1, "gold text says 'Yes'"), (2, "case id '../../x' is not allowed"),
                                             (3, "gold 'D' is not among the option ids"),
                                             (4, "duplicate case id 'CC001' (first on row 1)")]):
        assert f"cases.csv row {row}: " in line and fragment in line, line
    assert "4 problems" in lines[4] and "nothing was written" in lines[4]
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "out.jsonl").exists()


def _one_parquet(path: Path, case_id: str, data: bytes) -> None:
    """A one-case Parquet file whose image is embedded bytes (JSON cannot carry bytes)."""
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (it comes with the dev extra)")
    import pyarrow.parquet as pq

    row = dict(ROWS[0], evaluation_id=case_id, images=[{"bytes": data, "path": None}])
    pq.write_table(pa.Table.from_pylist([row]), path)


def test_embedded_images_never_overwrite_a_different_file(tmp_path: Path):
    source = tmp_path / "one.parquet"
    _one_parquet(source, "CC001", _png(1))
    images = tmp_path / "images"
    target = tmp_path / "cases.jsonl"
    first = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(images)])
    assert first.exit_code == 0, first.output
    assert (images / "CC001.png").read_bytes() == _png(1)
    again = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(images)])
    assert again.exit_code == 2 and "already exists; pass --force" in again.stderr
    same = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(images), "--force"])
    assert same.exit_code == 0 and "(1 already there)" in same.stderr  # identical bytes: kept, not rewritten
    _one_parquet(source, "CC001", _png(2))
    before = tree_snapshot(tmp_path)
    other = run_cli(["cases", "import", str(source), "--to", str(target), "--images", str(images), "--force"])
    assert other.exit_code == 2
    assert "CC001.png already exists with other content; cfkit never overwrites it" in other.stderr
    assert tree_snapshot(tmp_path) == before


def test_embedded_images_need_an_image_root(tmp_path: Path):
    source = tmp_path / "one.parquet"
    _one_parquet(source, "CC001", _png(1))
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "cases.jsonl")])
    assert result.exit_code == 2 and "give --images DIR" in result.stderr


@pytest.mark.parametrize("case_id", ["../../evil", "/tmp/evil", "a/b"])
def test_a_hostile_id_writes_no_image_anywhere(tmp_path: Path, case_id: str):
    source = tmp_path / "src" / "one.parquet"
    source.parent.mkdir()
    _one_parquet(source, case_id, _png(1))
    images = tmp_path / "deep" / "er" / "images"
    before = tree_snapshot(tmp_path)
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "cases.jsonl"), "--images", str(images)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not allowed" in lines[0] and "row 1" in lines[0], result.stderr
    assert "Nothing was written" in lines[0]
    assert tree_snapshot(tmp_path) == before and not images.exists()
    assert not Path("/tmp/evil.png").exists()


@pytest.mark.parametrize("image", ["/etc/passwd", "../outside.png", "sub\\..\\..\\x.png"])
def test_a_hostile_image_path_is_refused_with_the_case_id(tmp_path: Path, image: str):
    source = tmp_path / "cases.json"
    source.write_text(json.dumps([{"id": "CC001", "question": "Fine?", "options": ["Yes", "No"], "gold": "B",
                                   "image": image}]))
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl"),
                      "--images", str(tmp_path)])
    assert result.exit_code == 2
    assert "case 'CC001': image path" in result.stderr and not (tmp_path / "out.jsonl").exists()


def test_an_image_given_as_a_url_is_refused_even_without_an_image_folder(tmp_path: Path):
    # Without --images the files are not checked, and a URL passed as a relative path: exit 0, a cases file
    # whose images no command could ever read.
    source = tmp_path / "cases.csv"
    source.write_text('id,image,question,options,gold\nu1,https://example.org/a.png,Fine?,"[""Yes"", ""No""]",No\n')
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2 and not (tmp_path / "out.jsonl").exists()
    assert "case 'u1': image path 'https://example.org/a.png' is a URL" in result.stderr
    assert "download the image into the image root" in result.stderr


def test_a_datasets_folder_with_splits_needs_split(tmp_path: Path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (it comes with the dev extra)")
    rows = _json_rows()
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    part = datasets.Dataset.from_dict(columns)
    datasets.DatasetDict({"test": part, "dev": part}).save_to_disk(str(tmp_path / "hf"))
    refused = run_cli(["cases", "import", str(tmp_path / "hf"), "--to", str(tmp_path / "out.jsonl")])
    assert refused.exit_code == 2 and "holds the splits test, dev; choose one with --split NAME" in refused.stderr
    chosen = run_cli(["cases", "import", str(tmp_path / "hf"), "--split", "dev", "--to", str(tmp_path / "out.jsonl")])
    assert chosen.exit_code == 0, chosen.output
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize("make, what", [
    (lambda p: p.with_suffix(".xlsx").write_bytes(b"PK"), "cannot tell the format"),
    (lambda p: p.with_suffix(".csv").write_bytes(b"id,question\n\xff\xfe,x\n"), "not UTF-8"),
    (lambda p: p.with_suffix(".csv").write_text("id,id\n1,2\n"), "appears more than once"),
    (lambda p: p.with_suffix(".json").write_text('{"a": [], "b": []}'), "holding one list of records"),
    (lambda p: p.with_suffix(".parquet").write_text("not parquet"), "not a readable Parquet file"),
    (lambda p: p.with_suffix(".csv").mkdir(), "not a folder written by datasets' save_to_disk"),
])
def test_unreadable_sources_are_one_line(tmp_path: Path, make, what: str):
    make(tmp_path / "src")
    source = next(tmp_path.glob("src.*"))
    if source.suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="pyarrow is not installed (it comes with the dev extra)")
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], result.stderr


def test_a_csv_with_a_bom_and_list_cells_imports(tmp_path: Path):
    source = tmp_path / "cases.csv"
    text = ('id,images,question,options,gold,provenance\n'
            'CC001,"[""a.png"", ""b.png""]",Fine?,"[""Yes"", ""No""]",No,"{""title"": ""T""}"\n')
    source.write_bytes(b"\xef\xbb\xbf" + text.encode())
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out.jsonl").read_text())
    assert record["images"] == ["a.png", "b.png"] and record["gold"] == "B"  # gold given as the option's text
    assert record["yes_option"] == "A" and record["provenance"] == {"title": "T"}


def test_a_failed_write_takes_back_the_images_it_wrote(tmp_path: Path):
    import resource
    import signal
    import subprocess
    import sys

    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (it comes with the dev extra)")
    import pyarrow.parquet as pq

    source = tmp_path / "big.parquet"
    rows = _embedded_rows()
    rows[0]["rationale"] = "long " * 40_000  # the cases file will be far larger than any image
    pq.write_table(pa.Table.from_pylist(rows), source)

    def small_files_only() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))

    images, target = tmp_path / "images", tmp_path / "cases.jsonl"
    done = subprocess.run([sys.executable, "-m", "cfkit", "cases", "import", str(source), "--to", str(target),
                           "--images", str(images)], capture_output=True, text=True, preexec_fn=small_files_only,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was imported" in lines[0], done.stderr
    assert not target.exists() and not images.exists()


@pytest.mark.parametrize("columns, mapping", [(("c1", "c2", "c3"), ["--map", "options=c1,c2,c3"]),
                                              (("option_A", "option_B", "option_C"), [])])
def test_an_empty_option_cell_leaves_the_gold_on_the_option_of_its_column(tmp_path: Path, columns, mapping):
    # Options spread over columns whose names carry no id took their ids from the options read so far: with the
    # first cell empty, the second column became 'A' and a gold 'B' named the third column's option, in silence.
    source = tmp_path / "cases.csv"
    source.write_text(f"id,image,question,{','.join(columns)},answer\n"
                      "r1,a.png,Which?,Red,Green,Blue,B\n"
                      "r2,a.png,Which?,,Green,Blue,B\n"
                      "r3,a.png,Which?,Red,,Blue,C\n")
    result = run_cli(["cases", "import", str(source), "--to", str(tmp_path / "out.jsonl"), *mapping])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    gold_texts = [next(o["text"] for o in r["options"] if o["id"] == r["gold"]) for r in records]
    assert gold_texts == ["Green", "Green", "Blue"]
    assert [[o["id"] for o in r["options"]] for r in records] == [["A", "B", "C"], ["B", "C"], ["A", "C"]]


# ── a gold answer given as the option's 0-based position (Hugging Face datasets' 'choices' + integer 'answer') ──

HF_ROWS = [{"id": "H1", "image": "h1.png", "question": "Which event fits?", "choices": ["A wedding", "A funeral", "A race"],
            "answer": 2},
           {"id": "H2", "image": "h2.png", "question": "Is it suitable?", "choices": ["Yes", "No"], "answer": 0}]


def _hf_jsonl(path: Path, rows: list[dict] = HF_ROWS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _import(source: Path, target: Path, *extra: str):
    return run_cli(["cases", "import", str(source), "--to", str(target), *extra])


def _golds(target: Path) -> dict[str, str]:
    return {r["id"]: next(o["text"] for o in r["options"] if o["id"] == r["gold"])
            for r in map(json.loads, target.read_text().splitlines())}


def test_an_integer_gold_is_read_as_an_option_position_only_when_mapped_so(tmp_path: Path):
    source = _hf_jsonl(tmp_path / "hf.jsonl")
    target = tmp_path / "out.jsonl"
    # Unmapped, the integer is not an option id: refused, each row saying how to map it, nothing written.
    refused = _import(source, target)
    assert refused.exit_code == 2 and not target.exists()
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 3 and all("--map gold_index=answer" in line for line in lines[:2]), refused.stderr
    assert "hf.jsonl:1: gold '2' (column 'answer') is not one of the option ids ['A', 'B', 'C']" in lines[0]
    done = _import(source, target, "--map", "gold_index=answer", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["mapping"]["gold_index"] == ["answer"]
    assert _golds(target) == {"H1": "A race", "H2": "Yes"}
    # A CSV holds the index as text; a column of another meaning named like a gold is left alone.
    csv_source = tmp_path / "hf.csv"
    csv_source.write_text('id,image,question,choices,answer,label\nH1,h1.png,Which?,"[""x"", ""y""]",1,keep\n')
    assert _import(csv_source, tmp_path / "csv.jsonl", "--map", "gold_index=answer").exit_code == 0
    assert _golds(tmp_path / "csv.jsonl") == {"H1": "y"}


def test_a_datasets_folder_with_choices_and_an_integer_answer_imports(tmp_path: Path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (it comes with the dev extra)")
    columns = {k: [r[k] for r in HF_ROWS] for k in HF_ROWS[0]}
    datasets.Dataset.from_dict(columns).save_to_disk(str(tmp_path / "hf-export"))
    target = tmp_path / "out.jsonl"
    result = _import(tmp_path / "hf-export", target, "--map", "gold_index=answer")
    assert result.exit_code == 0, result.output
    assert _golds(target) == {"H1": "A race", "H2": "Yes"}


@pytest.mark.parametrize("answer, said", [
    (3, "field 'gold_index' (column 'answer') is 3, but the case has 3 options (positions 0 to 2)"),
    (-1, "is -1, but the case has 3 options (positions 0 to 2)"),
    ("C", "field 'gold_index' (column 'answer') must be a whole number, the 0-based position of the gold option "
          "among the options; got 'C'"),
    (1.5, "must be a whole number"), (True, "must be a whole number"), ("2", None), (2.0, None)])
def test_a_gold_index_out_of_range_or_not_whole_is_refused_on_its_row(tmp_path: Path, answer, said):
    rows = [HF_ROWS[0] | {"answer": answer}, HF_ROWS[1]]
    target = tmp_path / "out.jsonl"
    result = _import(_hf_jsonl(tmp_path / "hf.jsonl", rows), target, "--map", "gold_index=answer")
    if said is None:  # digits in a text cell, a whole float as pandas writes one: the same position
        assert result.exit_code == 0, result.output
        assert _golds(target)["H1"] == "A race"
        return
    assert result.exit_code == 2 and not target.exists()
    lines = result.stderr.strip().splitlines()  # one problem: one line, saying nothing was written
    assert len(lines) == 1 and lines[0].startswith("error: ") and "hf.jsonl:1: " in lines[0], result.stderr
    assert said in lines[0] and lines[0].endswith("Nothing was written.")


def test_a_gold_index_beside_another_gold_is_refused_or_checked(tmp_path: Path):
    source = _hf_jsonl(tmp_path / "hf.jsonl", [r | {"gold_text": r["choices"][0]} for r in HF_ROWS])
    both = _import(source, tmp_path / "out.jsonl", "--map", "gold_index=answer", "--map", "gold=id")
    lines = both.stderr.strip().splitlines()
    assert both.exit_code == 2 and len(lines) == 1 and "both give the gold answer; keep one" in lines[0]
    # With a gold text too, the two must agree (H1's text names option 0, its index option 2).
    checked = _import(source, tmp_path / "out.jsonl", "--map", "gold_index=answer")
    assert checked.exit_code == 2 and "gold 'C' is the option 'A race' but the gold text says 'A wedding'" in \
        " ".join(checked.stderr.split())
