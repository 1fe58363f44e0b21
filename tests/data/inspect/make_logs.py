"""Write the inspect_ai logs of tests/interop/test_interop_inspect.py with inspect_ai itself (not run by the tests).

inspect_ai cannot be installed beside cfkit's pinned fsspec, so these logs were
made once in a separate virtual environment and are kept here:

    python -m venv /tmp/inspect && /tmp/inspect/bin/pip install inspect_ai
    /tmp/inspect/bin/python tests/data/inspect/make_logs.py tests/data/inspect

A real task over twelve cases of the paper workspace (tests/support/report_workspace.py):
the multiple_choice solver and the choice scorer, answered by inspect_ai's
mockllm model with the replies in REPLIES, written as .eval and as .json.
"""

import json
import shutil
import sys
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice

#: case id -> the reply the model gives (ambiguous ones echo the options).
REPLIES = {
    "Y000": "ANSWER: A", "Y001": "Yes, it suits the occasion.\n\nANSWER: A", "Y002": "ANSWER: B",
    "Y003": "A. Yes\nB. No", "N000": "ANSWER: B", "N001": '{"answer": "B", "reason": "a funeral"}',
    "N002": "ANSWER: A", "N003": "No.\n\nANSWER: B", "N004": "A. Yes\nB. No", "N005": "ANSWER: B",
    "N006": "ANSWER: A", "N007": "It does not fit.\n\nANSWER: B",
}


def main(folder: Path) -> None:
    samples = [Sample(id=case, input="Is this picture suitable for the event's poster?", choices=["Yes", "No"],
                      target="A" if case.startswith("Y") else "B") for case in REPLIES]
    outputs = []
    for reply in REPLIES.values():
        output = ModelOutput.from_content("mockllm/model", reply)
        # Usage given, so that mockllm does not count tokens with tiktoken (which downloads its tables).
        output.usage = ModelUsage(input_tokens=120, output_tokens=len(reply.split()), total_tokens=120 + len(reply.split()))
        outputs.append(output)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = Task(dataset=samples, solver=multiple_choice(), scorer=choice(), name="contextcanvas")
    (log,) = eval(task, model=model, log_dir=str(folder / "raw"), max_connections=1, max_samples=1,
                  display="none")
    full = read_eval_log(log.location)
    write_eval_log(full, str(folder / "contextcanvas.eval"))
    write_eval_log(full, str(folder / "contextcanvas.json"))
    (folder / "replies.json").write_text(json.dumps(REPLIES, indent=1) + "\n")
    shutil.rmtree(folder / "raw")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
