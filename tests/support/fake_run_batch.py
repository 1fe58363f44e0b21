"""A stand-in for ``vllm run-batch -i IN.jsonl -o OUT.jsonl --model NAME``, for tests: no model, same files.

It checks each input line as vLLM's ``BatchRequestInput`` does (a JSON object
with ``custom_id``, ``method`` POST, ``url`` /v1/chat/completions and a
``body`` for the model it serves, whose images are base64 data URLs it can
decode) and refuses the whole file, exit status 1, on the first line that is
not. Each request is answered as the scripted test model answers (picture N:
A when N is odd, else B) and written in vLLM's output format: ``id``,
``custom_id``, ``response`` (``status_code``, ``request_id``, ``body``) and
``error`` (None, or for a failed request a string, with status 400 and no
body, as vLLM writes it; with ``--error-as object``, its error response as current vLLM writes it, ``{"error":
{"message", "type", "param", "code"}}``, with that status). ``--fail-every K`` fails every K-th request;
``--garbage`` adds a line that is not JSON; ``--reply cut-off`` answers every
request as a model stopped at its token limit does (``finish_reason``
"length", the JSON cut short), ``--reply empty`` with no text.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
import uuid


def _check(line: dict, model: str, number: int) -> None:
    problems = []
    if not isinstance(line.get("custom_id"), str):
        problems.append("custom_id")
    if line.get("method") != "POST":
        problems.append("method")
    if line.get("url") != "/v1/chat/completions":
        problems.append("url")
    body = line.get("body")
    if not isinstance(body, dict) or body.get("model") != model or not isinstance(body.get("messages"), list):
        problems.append("body")
    else:
        for message in body["messages"]:
            for part in message["content"] if isinstance(message.get("content"), list) else ():
                if part.get("type") == "image_url":
                    head, _, data = part["image_url"]["url"].partition(",")
                    if not head.startswith("data:image/") or not head.endswith(";base64"):
                        problems.append("image url")
                    base64.b64decode(data, validate=True)
    if problems:
        raise SystemExit(f"line {number}: invalid batch request ({', '.join(problems)})")


def _answer(body: dict) -> str:
    text = " ".join(part.get("text", "") for m in body["messages"] if m["role"] == "user"
                    for part in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]))
    found = re.search(r"Is picture (\d+)", text)
    letter = "A" if found is None or int(found.group(1)) % 2 else "B"
    return json.dumps({"answer": letter, "reason": "offline", "confidence": "high"})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-i", "--input-file", required=True)
    parser.add_argument("-o", "--output-file", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--reply", choices=("whole", "cut-off", "empty"), default="whole")
    parser.add_argument("--error-as", choices=("string", "object"), default="string")
    args = parser.parse_args(argv)
    out = []
    with open(args.input_file, encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            line = json.loads(text)
            _check(line, args.model, number)
            request_id = f"vllm-batch-{uuid.uuid4().hex}"
            if args.fail_every and number % args.fail_every == 0:
                response, error = {"status_code": 400, "request_id": request_id}, "the engine ran out of memory"
                if args.error_as == "object":
                    response = {"status_code": 500, "request_id": request_id, "body": None}
                    error = {"error": {"message": "the engine ran out of memory", "type": "InternalServerError",
                                       "param": None, "code": 500}}
            else:
                text = {"whole": _answer(line["body"]), "cut-off": _answer(line["body"])[:20], "empty": ""}[args.reply]
                finish = "length" if args.reply == "cut-off" else "stop"
                completion = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                              "model": args.model, "choices": [{"index": 0, "finish_reason": finish, "message": {
                                  "role": "assistant", "content": text}}],
                              "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}}
                response, error = {"status_code": 200, "request_id": request_id, "body": completion}, None
            out.append(json.dumps({"id": f"vllm-{uuid.uuid4().hex}", "custom_id": line["custom_id"],
                                   "response": response, "error": error}))
    if args.garbage:
        out.insert(len(out) // 2, "{this is not json")
    with open(args.output_file, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
