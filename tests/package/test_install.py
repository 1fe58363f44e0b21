"""Install etiquette: torch as ranges that keep a user's supported torch, CI's exact pair inside them,
and install and download hints that name commands that really exist."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from cfkit.hints import DISTRIBUTION, download_hint, install_hint
from support.workspace import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
CONSTRAINTS = REPO / ".ci" / "constraints.txt"

# Releases a user may already have: PyPI's builds and the PyTorch index's local-version builds.
SUPPORTED = {"torch": ["2.10.0", "2.13.0", "2.13.0+cpu", "2.14.1", "2.14.1+cu130"],
             "torchvision": ["0.25.0", "0.28.0", "0.28.0+cpu", "0.29.1"]}
# Below the floor torch.load(weights_only=True) can be made to run code; the next major is untested.
UNSUPPORTED = {"torch": ["2.9.1", "3.0.0"], "torchvision": ["0.24.1", "1.0.0"]}


def _requirements(name: str) -> list[tuple[str, Requirement]]:
    found = [(extra, Requirement(text)) for extra, texts in EXTRAS.items() for text in texts]
    return [(extra, req) for extra, req in found if req.name == name]


@pytest.mark.parametrize("name", ["torch", "torchvision"])
def test_torch_requirements_are_ranges_that_admit_every_supported_release(name: str):
    requirements = _requirements(name)
    assert {extra for extra, _ in requirements} >= ({"diffusers", "hf", "lpips"} if name == "torch"
                                                    else {"hf", "lpips"})
    for extra, req in requirements:
        assert not any(spec.operator in ("==", "===") for spec in req.specifier), f"[{extra}] pins {req}"
        for version in SUPPORTED[name]:
            assert req.specifier.contains(version), f"[{extra}] {req} refuses {version}"
        for version in UNSUPPORTED[name]:
            assert not req.specifier.contains(version), f"[{extra}] {req} admits {version}"


def test_ci_constraints_pin_one_pair_that_the_metadata_admits():
    pins = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            assert [spec.operator for spec in req.specifier] == ["=="], f"{CONSTRAINTS.name}: {line} is not a pin"
            pins[req.name.lower()] = next(iter(req.specifier)).version
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name in ("torch", "torchvision"):
        for extra, req in _requirements(name):
            assert req.specifier.contains(pins[name]), f"CI's {name}=={pins[name]} is outside [{extra}] {req}"


def test_install_hint_names_this_distribution_quoted_for_any_shell():
    assert DISTRIBUTION == PROJECT["name"]
    hint = install_hint("lpips")
    assert hint == "pip install 'cfkit-probes[lpips]'"
    assert shlex.split(hint) == ["pip", "install", "cfkit-probes[lpips]"]  # the brackets reach pip unexpanded


def test_every_install_hint_in_the_code_names_an_extra_that_exists():
    used = {}
    for path in sorted((REPO / "cfkit").rglob("*.py")):
        for extra in re.findall(r"install_hint\(\s*['\"]([^'\"]+)['\"]\s*\)", path.read_text(encoding="utf-8")):
            used.setdefault(extra, path.relative_to(REPO))
    assert used, "no install hints found: the pattern above no longer matches the code"
    assert not {extra: where for extra, where in used.items() if extra not in EXTRAS}


def test_no_message_spells_out_an_install_or_download_command_by_hand():
    # A hand-written command drifts from the real distribution name and quoting; hints.py builds them.
    stale = re.compile(r"pip install\s+['\"]?cfkit\b|huggingface-cli")
    offenders = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                 for path in sorted((REPO / "cfkit").rglob("*.py")) if path.name != "hints.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if stale.search(line)]
    assert not offenders


def test_each_install_hint_resolves_to_this_installation_without_the_network():
    # pip keeps an installed cfkit-probes and adds only what the extra needs; a wrong name would
    # send pip to the package index, which --no-index turns into a failure here.
    requirements = [shlex.split(install_hint(extra))[2] for extra in EXTRAS]
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", *requirements],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "does not provide the extra" not in result.stderr, result.stderr
    assert f"Requirement already satisfied: {DISTRIBUTION}[" in result.stdout
    assert "Would install" not in result.stdout, result.stdout


def test_download_hint_quotes_its_arguments():
    assert shlex.split(download_hint("org/model", "/models/my model")) == [
        "hf", "download", "org/model", "--local-dir", "/models/my model"]
    assert download_hint("org/model") == "hf download org/model"


def test_download_hint_is_a_command_the_installed_huggingface_hub_provides():
    (hf,) = entry_points(group="console_scripts", name="hf")
    module, function = hf.value.split(":")
    launcher = f"import sys; sys.argv[0] = 'hf'; from {module} import {function}; sys.exit({function}())"
    result = subprocess.run([sys.executable, "-c", launcher, "download", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "REPO_ID" in result.stdout and "--local-dir" in result.stdout


def _metadata_only_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel holding nothing but the metadata of ``name`` ``version``: what pip sees of an installed torch."""
    import base64
    import hashlib
    import zipfile

    dist_info = f"{name}-{version}.dist-info"
    files = {f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cfkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(text.encode())}\n" for path, text in files.items()) + f"{dist_info}/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(path, text)
    return wheel


def test_installing_an_extra_keeps_the_supported_torch_a_user_already_has(tmp_path: Path):
    """A fresh venv holding torch 2.13.0 and torchvision 0.28.0 (not CI's pair): pip's plan for
    cfkit-probes[lpips] installs the rest and replaces neither."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    wheels = [_metadata_only_wheel(tmp_path, "torch", "2.13.0"), _metadata_only_wheel(tmp_path, "torchvision", "0.28.0")]
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *map(str, wheels)],
                   check=True, timeout=300)
    report = tmp_path / "plan.json"
    result = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
                             f"{REPO}[lpips]"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    planned = {item["metadata"]["name"].lower(): item["metadata"]["version"]
               for item in json.loads(report.read_text())["install"]}
    assert "cfkit-probes" in planned and "lpips" in planned  # the extra is really resolved ...
    assert "torch" not in planned and "torchvision" not in planned, planned  # ... around the user's torch
