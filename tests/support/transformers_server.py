"""`transformers serve` on 127.0.0.1, serving a tiny random LLaVA from a local folder, for tests.

``transformers serve`` is transformers' own OpenAI-compatible server (FastAPI
and uvicorn, from the ``transformers[serving]`` extra). Here it is started as
a subprocess of this interpreter with the model folder as its pinned model
(the positional ``FORCE_MODEL`` argument: loaded before the server listens,
and the only model it answers for, under the name it was given), bound to
127.0.0.1 on a free port, with the Hugging Face hub offline and its update
check off, so nothing is downloaded. Its combined stdout and stderr go to a
log file, which is how tests count the requests it received and answered.

The model is the two-layer LLaVA the hf backend tests build (a CLIP vision
tower and a Llama text model with a word-level tokenizer, random weights,
seed 0), with two differences that make it a better witness:

- its chat template keeps every word, image placeholder and role name
  separated by whitespace, so a prompt with images has exactly the text
  tokens of the same prompt without them plus the images' patch tokens;
- its generation config suppresses the special tokens, so every reply is
  ``max_tokens`` vocabulary words, never an empty string.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from support import tiny_llava

#: Whitespace between every part; ``{{ '\n' }}`` because transformers renders templates with trim_blocks.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] + ':' }}"
    "{% if m['content'] is string %}{{ ' ' + m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}{{ ' <image>' }}{% else %}{{ ' ' + c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"
)
IMAGE_SIZE, PATCH_SIZE = tiny_llava.IMAGE_SIZE, tiny_llava.PATCH_SIZE
#: Tokens one image becomes: one per patch of the 28-px crop (the class token is dropped, strategy "default").
TOKENS_PER_IMAGE = (IMAGE_SIZE // PATCH_SIZE) ** 2

# Lines of the server's log: one when a chat request is handled, one when a response is sent.
_RECEIVED = re.compile(r"\[Request received\] Model: ")
_ANSWERED = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" 200')


def serving_missing() -> str | None:
    """Why ``transformers serve`` cannot run with this interpreter, or None when it can."""
    try:
        from transformers.utils.import_utils import is_accelerate_available, is_serve_available
    except ImportError:
        return "transformers is not installed"
    # is_serve_available checks fastapi, uvicorn, pydantic and openai; loading a model on a device also
    # needs accelerate, the extra's other part.
    if not (is_serve_available() and is_accelerate_available()):
        return "transformers serve needs its serving extra: pip install 'transformers[serving]'"
    return None


def save_tiny_llava(folder: Path) -> Path:
    """Save the tiny random LLaVA (weights, processor, tokenizer, chat template) to ``folder``."""
    return tiny_llava.save_tiny_llava(folder, chat_template=CHAT_TEMPLATE, seed=0, suppress_special=True)


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when the process that started it dies, even by SIGKILL."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TransformersServe:
    """``transformers serve MODEL`` as a subprocess on 127.0.0.1; a context manager that stops it by PID.

    ``model`` is the folder's name, relative to ``cwd``: the served model's name, which requests must
    give. ``startup_s`` is how long it took from the start to the first healthy ``/health``.
    """

    def __init__(self, cwd: Path, model: str, log: Path, *, ready_within_s: float = 120.0):
        self.cwd, self.model, self.log = cwd, model, log
        self.ready_within_s = ready_within_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    @property
    def argv(self) -> list[str]:
        # What the `transformers` console script runs (its entry point is transformers.cli.transformers:main),
        # run with this interpreter so that it is the transformers under test whatever is on PATH.
        return [sys.executable, "-m", "transformers.cli.transformers", "serve", self.model,
                "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu", "--log-level", "warning"]

    def __enter__(self) -> TransformersServe:
        env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
                            "HF_HOME": str(self.cwd / "hf-home")}  # an empty cache: the folder is all it has
        started = time.monotonic()
        with self.log.open("wb") as out:
            # Stopped by PID on exit; and should the test process be killed, the server goes with it.
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            self._wait_until_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _wait_until_healthy(self, started: float) -> None:
        health = f"http://127.0.0.1:{self.port}/health"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
        while time.monotonic() - started < self.ready_within_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited with status {self.proc.returncode} before it "
                                   f"was ready:\n{self.log_tail()}")
            try:
                with direct.open(health, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"transformers serve was not healthy within {self.ready_within_s:.0f} s:\n"
                           f"{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; waits for the process."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def received(self) -> int:
        """Chat requests the server has started to handle."""
        return len(_RECEIVED.findall(self.log_text()))

    def answered(self) -> int:
        """Chat responses the server has sent with status 200."""
        return len(_ANSWERED.findall(self.log_text()))
