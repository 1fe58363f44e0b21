"""The rerun shortcut (cfkit.probe.shortcut): the same command again on a finished run, without its backend.

Each test runs ``cfkit probe run`` as whole processes, as a user does, against a
real loopback server, and tells the shortcut from the full path by what the
process imported: the full path builds the backend (cfkit.backends), the shortcut
never does. The shortcut must say exactly what the full path says, and must
give way to the full path whenever anything the run's settings depend on
differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from support.chat_api_server import ChatServer
from support.probe_runs import many_cases, scripted_answer
from support.workspace import REPO, aged

PROBE = ("import json, sys\nfrom cfkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
         "    code = exc.code\nelse:\n    code = 0\n"
         "print('LOADED', json.dumps(sorted(m for m in ('pydantic', 'cfkit.backends', 'aiohttp', 'PIL', "
         "'rich.progress') "
         "if m in sys.modules)), code, file=sys.stderr)\n")


def _probe(ws: Path, url: str, *extra: str, env: dict[str, str] | None = None) -> tuple[str, str, list[str], int]:
    """(stdout, stderr without the probe's own line, the heavy modules loaded, exit status) of one process."""
    args = ["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", "--base-url", url,
            *extra]
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env=env)
    lines = done.stderr.splitlines(keepends=True)
    loaded, code = lines[-1].removeprefix("LOADED ").rsplit(" ", 1)
    return done.stdout, "".join(lines[:-1]), json.loads(loaded), int(code)


def test_the_same_command_again_takes_the_shortcut_and_says_exactly_what_the_full_path_says(tmp_path):
    ws = aged(many_cases(tmp_path / "ws", 3))
    with ChatServer(scripted_answer) as server:
        first = _probe(ws, server.url, "--json")
        assert first[3] == 0 and server.count == 3
        shortcut = _probe(ws, server.url, "--json")
        (ws / ".cfkit" / "reruns.json").unlink()  # forgotten: the same rerun by the full path
        full = _probe(ws, server.url, "--json")
        assert server.count == 3  # neither rerun sent anything
    assert shortcut[2] == [] and shortcut[3] == 0  # no backend built, no HTTP client, no image library
    assert "cfkit.backends" in full[2] and full[3] == 0  # the full path builds the backend (its options plainly read)
    assert (shortcut[0], shortcut[1]) == (full[0], full[1])  # stdout and stderr byte for byte
    summary = json.loads(shortcut[0])
    assert (summary["kept"], summary["sent"], summary["status"]) == (3, 0, "done")
    assert summary["run_id"] == json.loads(first[0])["run_id"]
    # Without --json too: the summary line. (No server at all now: neither path asks one.)
    url = server.url
    (ws / ".cfkit" / "reruns.json").unlink()  # (--json is no setting: the command above was remembered again)
    text_full = _probe(ws, url)
    text_shortcut = _probe(ws, url)
    assert "cfkit.backends" in text_full[2] and text_shortcut[2] == []
    assert (text_shortcut[0], text_shortcut[1], text_shortcut[3]) == (text_full[0], text_full[1], 0)
    assert "3" in text_shortcut[1] + text_shortcut[0]


def test_the_shortcut_gives_way_to_the_full_path_when_anything_the_settings_depend_on_differs(tmp_path):
    ws = aged(many_cases(tmp_path / "ws", 3))
    with ChatServer(scripted_answer) as server:
        assert _probe(ws, server.url, "--json")[3] == 0
        assert _probe(ws, server.url, "--json")[2] == []  # the shortcut, as a baseline

        # An environment variable the backend may read.
        env = {**os.environ, "CFKIT_SHORTCUT_TEST": "1"}
        assert "cfkit.backends" in _probe(ws, server.url, "--json", env=env)[2]
        # Another working directory (relative paths in flags and options would mean other files).
        done = subprocess.run([sys.executable, "-c", PROBE, "-w", str(ws), "probe", "run", "-m",
                               "openai:test-model", "-s", "contextcanvas", "--base-url", server.url, "--json"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.returncode == 0 and '"cfkit.backends"' in done.stderr.splitlines()[-1], done.stderr
        # Another option: another run, sent anew; not the finished one.
        other = _probe(ws, server.url, "--json", "-o", "temperature=0.5")
        assert "cfkit.backends" in other[2] and json.loads(other[0])["sent"] == 3
        # cfkit.toml changed.
        config = ws / "cfkit.toml"
        config.write_text(config.read_text() + "\n# a comment: the same configuration, but the file is rewritten\n")
        aged(ws)
        assert "cfkit.backends" in _probe(ws, server.url, "--json")[2]  # an input file of the run: checked by content
        assert _probe(ws, server.url, "--json")[2] == []  # … and found the same: the shortcut again
        config.write_text(config.read_text() + "\n[probe]\nconcurrency = 3\n")
        aged(ws)
        assert "cfkit.backends" in _probe(ws, server.url, "--json")[2]
        # An input file rewritten with other content: the run is checked anew (by content), not assumed.
        cases = ws / "data" / "cases.jsonl"
        before = _probe(ws, server.url, "--json")
        assert before[2] == []
        cases.write_text(cases.read_text().replace("Is picture 1", "Is the picture 1"))
        aged(ws)
        changed = _probe(ws, server.url, "--json")
        assert "cfkit.backends" in changed[2] and json.loads(changed[0])["run_id"] != json.loads(before[0])["run_id"]
        # A file touched with the same content: the full path finds the run by content; then the shortcut again.
        os.utime(cases, None)
        time.sleep(0.1)
        touched = _probe(ws, server.url, "--json")
        assert "cfkit.backends" in touched[2] and json.loads(touched[0])["sent"] == 0
        # The run deleted: the shortcut finds nothing and the run is made again.
        run_id = json.loads(touched[0])["run_id"]
        assert subprocess.run([sys.executable, "-m", "cfkit", "-w", str(ws), "runs", "rm", run_id],
                              capture_output=True, cwd=REPO, timeout=120).returncode == 0
        again = _probe(ws, server.url, "--json")
        assert "cfkit.backends" in again[2] and json.loads(again[0])["sent"] + json.loads(again[0])["from_cache"] == 3


def test_an_unreadable_list_of_remembered_commands_only_costs_the_shortcut(tmp_path):
    ws = aged(many_cases(tmp_path / "ws", 3))
    with ChatServer(scripted_answer) as server:
        first = _probe(ws, server.url, "--json")
        (ws / ".cfkit" / "reruns.json").write_text("{not json")
        again = _probe(ws, server.url, "--json")
        assert server.count == 3
        assert again[3] == 0 and "cfkit.backends" in again[2]
        assert json.loads(again[0])["run_id"] == json.loads(first[0])["run_id"]
        assert _probe(ws, server.url, "--json")[2] == []  # remembered again by the full path


def test_several_replicas_are_never_remembered(tmp_path):
    """Replicas report the weights they serve at start-up: the same command could resolve to another run."""
    ws = aged(many_cases(tmp_path / "ws", 3))
    with ChatServer(scripted_answer) as one, ChatServer(scripted_answer) as two:
        assert _probe(ws, one.url, "--base-url", two.url, "--json")[3] == 0
        again = _probe(ws, one.url, "--base-url", two.url, "--json")
        assert again[3] == 0 and "cfkit.backends" in again[2] and json.loads(again[0])["sent"] == 0


def test_in_a_pipe_the_rerun_writes_byte_for_byte_what_rich_writes_there(tmp_path):
    """With stderr not a terminal the bar's one line is written without Rich (cfkit.cli.progress_bar); with
    TTY_COMPATIBLE=0 in the environment (still no terminal) Rich decides, and draws it itself: the same bytes."""
    ws = aged(many_cases(tmp_path / "ws", 3))
    with ChatServer(scripted_answer) as server:
        for flags in (("--json",), ()):
            assert _probe(ws, server.url, *flags)[3] == 0
            quiet = _probe(ws, server.url, *flags)
            drawn = _probe(ws, server.url, *flags, env={**os.environ, "TTY_COMPATIBLE": "0"})
            assert quiet[3] == drawn[3] == 0
            assert "rich.progress" in drawn[2] and "rich.progress" not in quiet[2]
            assert (quiet[0], quiet[1]) == (drawn[0], drawn[1])
            assert "━" * 40 + " 3/3  0:00:00" in quiet[1]
        assert server.count == 3


def test_a_file_written_in_the_working_directory_keeps_the_shortcut_a_module_there_does_not(tmp_path, monkeypatch):
    """``python -m cfkit`` puts the working directory on the import path; a log written there changes its mtime
    but nothing a command imports, so the command is still the one remembered. A module or package put there
    could be imported instead of an installed one: then it is not."""
    from cfkit.probe.shortcut import _code_stamp

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for entry in ("", str(here)):  # as `python -c` and `python -m` put it there
        monkeypatch.setattr(sys, "path", [entry, *[p for p in sys.path if p not in ("", str(here))]])
        before = _code_stamp()
        (here / f"run{len(entry)}.log").write_text("output of a run\n")
        (here / f"out{len(entry)}").mkdir()  # a folder of outputs, not a package
        assert _code_stamp() == before
        (here / f"shadow{len(entry)}.py").write_text("")
        changed = _code_stamp()
        assert changed != before
        package = here / f"pkg{len(entry)}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        assert _code_stamp() != changed
