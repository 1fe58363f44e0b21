"""The commented study file ``cfkit study new`` writes: every table, each key explained, runnable offline as it is."""

from __future__ import annotations

EXAMPLE = '''\
# A cfkit study: every model below on every suite below, from one command.
#   cfkit study validate {name}     check it and print what it will ask (and cost, where prices are known)
#   cfkit study run {name}          run it (again: continues where it stopped; finished runs are not asked again)
#   cfkit study status {name}       what is done, running, failed, or stale because its inputs changed
#   cfkit study report {name}       the paper's tables for these models, in one report
# The format is in docs/formats.md ("Study file").

name = "{stem}"

# An OpenAI-compatible server (vLLM, SGLang, 'transformers serve', a provider). Its concurrency and rate hold
# for every run that uses it together: two models behind one server share its limit, never double it.
# [endpoints.local]
# url = "http://127.0.0.1:8000/v1"
# concurrency = 8          # requests in flight at once, over all runs using this endpoint
# rate = 20                # requests started per second, at most (leave out for no limit)
# api_key_env = "MY_KEY"   # environment variable with the key, if the server wants one

# One table per model; its name is how 'study status' and the compare pairs below refer to it.
[models.always-no]
model = "baseline:always-no"   # KIND:NAME as 'cfkit probe run -m' takes it
group = "baselines"            # the report shows rows under their groups (closed, open, aesthetic, or any name)

[models.majority]
model = "baseline:majority"
group = "baselines"

# [models.qwen-base]
# model = "openai:Qwen/Qwen3-VL-8B-Instruct"
# endpoint = "local"           # a name from [endpoints], or a URL (whose key: options = {{ api_key_env = "MY_KEY" }})
# protocol = "paper"           # default | paper (the supplement's settings)
# max_tokens = 512
# options = {{ timeout = 120 }}  # backend options, as -o KEY=VALUE ('cfkit probe backends' lists them)
# display = "Qwen3-VL-8B (base)"
# group = "open"

# One table per suite; an empty table asks the whole suite. Keys: limit, cases, subset, all_cases,
# reviewed_only, accepted_only (as on 'cfkit probe run').
[suites.contextcanvas]

[suites.counterfactual]

[suites.modality]

[suites.swap]

[report]
reference = false      # show the paper's published rows beside the study's
# compare = [["qwen-base", "qwen-specialist"]]   # paired tests, base first (Table S10)
resamples = 10000
seed = 0
'''


def example_text(file_name: str, stem: str) -> str:
    """The example study file, its comments naming ``file_name``."""
    return EXAMPLE.format(name=file_name, stem=stem)
