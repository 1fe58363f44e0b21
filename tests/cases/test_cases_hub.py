"""``cfkit cases import hf://datasets/OWNER/NAME[:SPLIT]``, offline, against a dataset in the datasets cache.

The cache is written the way ``datasets.load_dataset`` leaves a downloaded
dataset (``HF_DATASETS_CACHE/OWNER___NAME/default/0.0.0/HASH/`` with its arrow
files and dataset_info.json, datasets' ``packaged_modules/cache``), by
preparing a Parquet builder there. Every run is a subprocess with its own
``HF_HOME`` and ``HF_HUB_OFFLINE=1``: datasets reads both when imported, and
nothing here may reach the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.case_sources import _json_rows
from support.workspace import run_cli

pytest.importorskip("datasets", reason="datasets is not installed (it comes with the dev extra)")

MAKE_CACHE = textwrap.dedent("""
    import json, os, sys
    import pyarrow as pa, pyarrow.parquet as pq
    import datasets
    from datasets.packaged_modules.parquet.parquet import Parquet

    rows, folder = json.loads(open(sys.argv[1]).read()), sys.argv[2]
    files = {}
    for split, part in (("test", rows), ("train", rows[:1])):
        files[split] = os.path.join(folder, f"{split}.parquet")
        pq.write_table(pa.Table.from_pylist(part), files[split])
    builder = Parquet(data_files=files, dataset_name="canvas", config_name="default", hash="0123456789abcdef")
    builder.download_and_prepare()
    root = datasets.config.HF_DATASETS_CACHE
    os.rename(os.path.join(root, "canvas"), os.path.join(root, "acme___canvas"))
    config = os.path.join(root, "acme___canvas")
    os.rename(os.path.join(config, os.listdir(config)[0]), os.path.join(config, "default"))
""")


def offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    return env | {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COLUMNS": "200"}


def cfkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    (root / "rows.json").write_text(json.dumps(_json_rows()))
    (root / "src").mkdir()
    made = subprocess.run([sys.executable, "-c", MAKE_CACHE, str(root / "rows.json"), str(root / "src")],
                          capture_output=True, text=True, env=offline_env(root / "home"), timeout=300)
    assert made.returncode == 0, made.stderr
    for path in (root / "src").iterdir():
        path.unlink()  # only the cache is left to read from
    return root


def test_a_cached_hub_dataset_imports_offline_like_the_same_rows_from_a_file(hub_home, tmp_path):
    local = tmp_path / "rows.jsonl"
    local.write_text("".join(json.dumps(r) + "\n" for r in _json_rows()))
    expected = run_cli(["cases", "import", str(local), "--to", str(tmp_path / "from-file.jsonl")])
    assert expected.exit_code == 0, expected.output
    got = cfkit(offline_env(hub_home / "home"), "cases", "import", "hf://datasets/acme/canvas:test", "--to",
                str(tmp_path / "from-hub.jsonl"))
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "from-hub.jsonl").read_text() == (tmp_path / "from-file.jsonl").read_text()
    assert len((tmp_path / "from-hub.jsonl").read_text().splitlines()) == len(_json_rows())


def test_split_by_option_and_a_dataset_of_several_splits_needs_one(hub_home, tmp_path):
    env = offline_env(hub_home / "home")
    one = cfkit(env, "cases", "import", "hf://datasets/acme/canvas", "--split", "train", "--to", str(tmp_path / "a.jsonl"))
    assert one.returncode == 0, one.stderr
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 1
    both = cfkit(env, "cases", "import", "hf://datasets/acme/canvas", "--to", str(tmp_path / "b.jsonl"))
    assert both.returncode == 2 and "holds the splits" in both.stderr and "--split" in both.stderr


def test_an_uncached_dataset_offline_is_one_clear_line(hub_home, tmp_path):
    result = cfkit(offline_env(hub_home / "home"), "cases", "import", "hf://datasets/acme/absent", "--to",
                   str(tmp_path / "c.jsonl"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "hf://datasets/acme/absent: the Hugging Face Hub cannot be reached (offline mode is on)" in lines[0]
    assert "in neither the datasets cache" in lines[0] and not (tmp_path / "c.jsonl").exists()


def test_a_malformed_hub_name_is_refused(tmp_path):
    result = run_cli(["cases", "import", "hf://datasets/just-a-name", "--to", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 2 and "hf://datasets/OWNER/NAME" in result.stderr


MAKE_SNAPSHOT = textwrap.dedent("""
    import json, os, sys
    import pyarrow as pa, pyarrow.parquet as pq
    from huggingface_hub import constants

    rows, revision = json.loads(open(sys.argv[1]).read()), "b" * 40
    repo = os.path.join(constants.HF_HUB_CACHE, "datasets--acme--files")
    os.makedirs(os.path.join(repo, "snapshots", revision, "data"))
    os.makedirs(os.path.join(repo, "refs"))
    open(os.path.join(repo, "refs", "main"), "w").write(revision)
    pq.write_table(pa.Table.from_pylist(rows), os.path.join(repo, "snapshots", revision, "data",
                                                            "test-00000-of-00001.parquet"))
""")


def test_a_dataset_in_the_hub_cache_imports_offline(hub_home, tmp_path):
    # The layout snapshot_download leaves: datasets--OWNER--NAME/refs/main and snapshots/REVISION/…
    env = offline_env(hub_home / "home")
    made = subprocess.run([sys.executable, "-c", MAKE_SNAPSHOT, str(hub_home / "rows.json")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert made.returncode == 0, made.stderr
    got = cfkit(env, "cases", "import", "hf://datasets/acme/files:test", "--to", str(tmp_path / "snap.jsonl"))
    assert got.returncode == 0, got.stderr
    local = tmp_path / "rows.jsonl"
    local.write_text("".join(json.dumps(r) + "\n" for r in _json_rows()))
    expected = run_cli(["cases", "import", str(local), "--to", str(tmp_path / "from-file.jsonl")])
    assert expected.exit_code == 0, expected.output
    assert (tmp_path / "snap.jsonl").read_text() == (tmp_path / "from-file.jsonl").read_text()
