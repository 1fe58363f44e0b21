"""The install and download commands that cfkit's messages tell users to run.

cfkit is published as the distribution ``cfkit-probes`` (the name ``cfkit`` on
the package index belongs to an unrelated project); the command and the import
name are ``cfkit``. Every message that suggests a command builds it here, so the
distribution name and the quoting live in one place.
"""

from __future__ import annotations

import shlex
from pathlib import Path

#: The name pip knows cfkit by; ``pyproject.toml``'s ``[project] name``.
DISTRIBUTION = "cfkit-probes"


def install_hint(extra: str) -> str:
    """The pip command that adds the optional dependency group ``extra`` to this installation.

    The requirement is single-quoted so that zsh does not expand the brackets.
    When cfkit is already installed (from the index or as an editable source
    checkout) pip keeps that installation and only adds what the extra needs.

    >>> install_hint("lpips")
    "pip install 'cfkit-probes[lpips]'"
    """
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def download_hint(repo_id: str, local_dir: str | Path | None = None) -> str:
    """The Hugging Face CLI command that fetches ``repo_id`` into the local cache, or into ``local_dir``.

    huggingface_hub's command is ``hf`` (the older ``huggingface-cli`` is gone
    from recent releases).

    >>> download_hint("org/model", "/models/my model")
    "hf download org/model --local-dir '/models/my model'"
    """
    command = f"hf download {shlex.quote(repo_id)}"
    if local_dir is not None:
        command += f" --local-dir {shlex.quote(str(local_dir))}"
    return command
