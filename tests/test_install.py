"""The install and download hints name commands that really exist: the published distribution, quoted,
and the Hugging Face CLI that huggingface_hub ships."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points

from cfkit.hints import DISTRIBUTION, download_hint, install_hint
from conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]


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
