"""What the README and docs/ point at exists: every `cfkit` command line names commands and options that exist
(Click's own tree, lazy groups loaded), and every path into this repository names a file or folder that is there,
so a renamed command, option or file cannot leave the documentation behind."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from cfkit.cli import cli
from support.workspace import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: Options every command takes through the top-level group.
GLOBAL = {"-w", "--workspace", "--debug", "-h", "--help"}


def _command_lines(text: str) -> list[str]:
    """The `cfkit …` commands of fenced blocks (continuation lines joined, comments cut) and of inline code."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            found.extend(_commands_in(line.split(" #")[0]))
    for code in re.findall(r"`(cfkit [^`]+)`", text):
        found.extend(_commands_in(code))
    return found


def _commands_in(line: str) -> list[str]:
    parts = re.split(r"\s*(?:&&|;|\|\|?)\s*", line)
    return [p.split(" > ")[0].strip() for p in parts if re.match(r"(?:\$ )?cfkit\s", p.strip())]


def _problem(line: str) -> str | None:
    try:
        tokens = shlex.split(line.removeprefix("$ "))
    except ValueError:
        return None  # prose with a quote in it, not a command line
    ctx = click.Context(cli)
    command: click.Command = cli
    path, i = ["cfkit"], 1
    while i < len(tokens) and isinstance(command, click.Group):
        token = tokens[i]
        if token.startswith("-"):
            i += 2 if token in ("-w", "--workspace") else 1
            continue
        sub = command.get_command(ctx, token)
        if sub is None:
            if token.isupper() or "…" in token or "..." in token:
                return None  # a placeholder for any command
            return f"no command {token!r} under '{' '.join(path)}'"
        command, i = sub, i + 1
        path.append(token)
    if isinstance(command, click.Group):
        return None
    known = set(GLOBAL)
    for param in command.params:
        known.update(param.opts)
        known.update(param.secondary_opts)
    for token in tokens[i:]:
        name = token.split("=")[0]
        if (name.startswith("--") and len(name) > 2) or re.fullmatch(r"-[a-zA-Z]", name):
            if name not in known:
                return f"'{' '.join(path)}' has no option {name}"
    return None


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_command_line_shown_names_commands_and_options_that_exist(document):
    lines = _command_lines(document.read_text(encoding="utf-8"))
    problems = [f"{line!r}: {problem}" for line in lines if (problem := _problem(line))]
    assert not problems, "\n".join(problems)


def test_the_check_finds_a_command_or_an_option_that_does_not_exist():
    wrong = _problem("cfkit probe run -m openai:x -s swap --max-tokenz 8")
    assert wrong == "'cfkit probe run' has no option --max-tokenz"
    assert _problem("cfkit runs lst") == "no command 'lst' under 'cfkit runs'"
    assert _problem("cfkit -w ws study run study.toml --batch") is None
    assert _command_lines("`cfkit runs list; cfkit runs export RUN > out.jsonl`") == [
        "cfkit runs list", "cfkit runs export RUN"]
    assert len(_command_lines((REPO / "README.md").read_text(encoding="utf-8"))) > 100


#: A path into this repository as the documents write one (not the tail of another path, e.g. `.cfkit/…`).
_REPO_PATH = re.compile(r"(?<![\w./-])((?:tests|benchmarks|examples|docs|cfkit|\.ci)/[\w./-]*\w)")


@pytest.mark.parametrize("document", [*DOCUMENTS, REPO / "benchmarks" / "README.md"], ids=lambda p: p.name)
def test_every_repository_path_named_exists(document):
    named = set(_REPO_PATH.findall(document.read_text(encoding="utf-8")))
    assert named or document.name != "README.md"
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert not missing, f"{document.name} names paths that are not in the repository: {missing}"


def test_the_path_check_reads_paths_as_written():
    assert _REPO_PATH.findall("see `tests/parse/test_parse_e2e.py`, and .cfkit/reruns.json in a workspace") == [
        "tests/parse/test_parse_e2e.py"]


def _benchmark_sections() -> dict[str, str]:
    text = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    parts = re.split(r"^## (\S+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_a_ratio_quoted_from_a_benchmark_section_is_the_one_recorded_there(document):
    """A sentence that gives a ratio such as '1.98x' and cites `benchmarks/README.md`, section `NAME` quotes
    the figure that section records (figures are rerun; the prose must follow them)."""
    sections = _benchmark_sections()
    text = " ".join(document.read_text(encoding="utf-8").split())
    wrong = []
    for sentence in re.split(r"(?<=[.!?]) ", text):
        cited = re.search(r"`benchmarks/README\.md`, section `?(\w+)`?", sentence)
        if not cited:
            continue
        assert cited.group(1) in sections, f"{document.name} cites a section benchmarks/README.md lacks: {sentence}"
        for figure in re.findall(r"(\d+\.\d+)x\b", sentence):
            if not re.search(rf"\b{re.escape(figure)} ?[x×]", sections[cited.group(1)]):
                wrong.append(f"{figure}x in: {sentence}")
    assert not wrong, "\n".join(wrong)
