"""A run about to plan starts importing its HTTP client on a thread (cfkit.backends.http.import_in_background),
where another CPU can run it; on one CPU it does not, and a run's own import waits for the thread's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.workspace import REPO

CHILD = """
import json, os, sys, threading
if sys.argv[1] == "one-cpu":
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
from cfkit.backends import load_backend
backend = load_backend("openai:test-model", {"base_url": "http://127.0.0.1:9/v1"})
before = "aiohttp" in sys.modules
backend.warm_up()
backend.warm_up()  # a second call starts nothing more
threads = [t.name for t in threading.enumerate() if t.name.startswith("cfkit-import")]
import aiohttp  # waits for the thread's import, when one runs
print(json.dumps({"before": before, "threads": threads, "session": hasattr(aiohttp, "ClientSession")}))
"""


def _child(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_the_openai_backend_imports_aiohttp_on_one_thread_only_where_another_cpu_can_run_it():
    import os

    if len(os.sched_getaffinity(0)) > 1:
        assert _child("all-cpus") == {"before": False, "threads": ["cfkit-import-aiohttp"], "session": True}
    assert _child("one-cpu") == {"before": False, "threads": [], "session": True}


def test_a_failed_import_on_the_thread_is_raised_where_the_run_imports_it(tmp_path):
    # aiohttp made unimportable: the thread swallows its error, the run's own import raises it.
    (tmp_path / "aiohttp.py").write_text("raise ImportError('broken aiohttp for the test')\n")
    code = ("import sys, threading\nfrom cfkit.backends import http\nhttp.import_in_background()\n"
            "[t.join() for t in threading.enumerate() if t.name == 'cfkit-import-aiohttp']\n"
            "try:\n    import aiohttp\nexcept ImportError as exc:\n    print('RAISED', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and "RAISED broken aiohttp for the test" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
