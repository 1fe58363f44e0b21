"""cfkit.toml read without pydantic gives what the full check gives: the same values, the same JSON, the same refusals.

Everyday commands read the workspace's settings on every start; a file whose
values are all plainly right skips pydantic (cfkit.workspace._plain). Each file
below is read both ways; a run's identity holds ``config.model_dump()``, so a
difference there would start every cached run over.
"""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from cfkit.errors import ConfigError
from cfkit.workspace import DEFAULT_TOML, _plain, config_from
from cfkit.workspace_schema import ConfigModel

FILES = [
    DEFAULT_TOML.format(cases='"data/cases.jsonl"', images='"data/images"', pairs=36),
    "",
    '[workspace]\npairs = 1\npair_prefix = "Pair_x-"\nstore = "/abs/store"\n',
    '[workspace]\npairs = 10000\n[check]\nmargin = 512\nlpips_backbone = "w.pth"\n',
    '[probe]\nmodel = "openai:gpt-5.5"\nprotocol = "paper"\nconcurrency = 256\nbase_urls = ["http://a", "http://b"]\n'
    '[probe.prices."openai:gpt-5.5"]\ninput = 1\noutput = 2.5\n',
    '[probe.prices."openai:gpt-5.5"]\ninput = 1\noutput = 2.5\ncached_input = 0.25\n',
    '[edit]\nengine = "classical"\ncandidates = 100\nauto = ["a", "b"]\n[edit.engines.a]\nsteps = 30\nnested = {k = [1, 2.5, true]}\n',
    # left to the full check: converted, or dates, or refused
    '[workspace]\npairs = "12"\n',
    '[probe]\nconcurrency = 4.0\n',
    '[probe.prices.x]\ninput = 1\noutput = 1e400\n',
    '[edit.engines.a]\nwhen = 1979-05-27T07:32:00Z\n',
    '[edit.engines.a]\nscale = inf\n',
    '[workspace]\npairs = 0\n', '[workspace]\npairs = 10001\n', '[workspace]\npairs = true\n',
    '[workspace]\npair_prefix = "1CF"\n', '[workspace]\npair_prefix = "CF\\n"\n', '[workspace]\npair_prefix = ""\n',
    '[probe]\nprotocol = "fast"\n', '[probe]\nconcurrency = 257\n', '[check]\nmargin = -1\n',
    '[probe.prices.x]\ninput = 1\noutput = 1\ncached_input = -1\n', '[probe.prices.x]\ninput = 1\ncached_input = 1\n',
    '[probe.prices.x]\ninput = 1\noutput = 1\ncached_input = "0.5"\n',
    '[probe.prices.x]\ninput = -1\noutput = 1\n', '[probe.prices.x]\ninput = 1\n', '[probe.prices.x]\ninput = 1\noutput = 1\nx = 1\n',
    '[dataset]\ncases = 3\n', '[dataset]\nextra = "x"\n', 'other = 1\n', 'dataset = "x"\n', '[edit]\nauto = "a"\n',
    '[edit]\nauto = ["a", 1]\n', '[edit.engines]\na = 1\n', '[probe]\nbase_urls = "http://a"\n',
    # Anthropic's cache-write prices: read, and refused below zero
    '[probe.prices."anthropic:c"]\ninput = 1\noutput = 5\ncache_write = 1.25\ncache_write_1h = 2\n',
    '[probe.prices.x]\ninput = 1\noutput = 1\ncache_write_1h = -2\n',
]


def _full(raw):
    try:
        model = ConfigModel.model_validate(raw)
    except Exception as exc:  # noqa: BLE001 - refused: compared below
        return None, exc
    return model, None


@pytest.mark.parametrize("text", FILES, ids=range(len(FILES)))
def test_both_readings_agree(text):
    raw = tomllib.loads(text)
    model, refusal = _full(raw)
    if refusal is not None:
        assert _plain(raw) is None  # never accepted without the full check
        with pytest.raises(ConfigError) as caught:
            config_from(raw, "cfkit.toml", "Fix it.")
        assert str(caught.value).startswith("cfkit.toml: ") and str(caught.value).endswith(" Fix it.")
        return
    config = config_from(raw, "cfkit.toml", "Fix it.")
    assert config.model_dump() == model.model_dump(mode="json")
    assert list(config.model_dump()) == list(model.model_dump(mode="json"))  # the same order, for the run's identity
    for section in ("dataset", "workspace", "edit", "probe", "check"):
        for field in dataclasses.fields(getattr(config, section)):
            got, want = getattr(getattr(config, section), field.name), getattr(getattr(model, section), field.name)
            if field.name == "prices":
                got = {k: dataclasses.asdict(v) for k, v in got.items()}
                want = {k: v.model_dump() for k, v in want.items()}
            assert got == want and type(got) is type(want), (section, field.name)


def test_plainly_right_files_skip_the_full_check():
    assert _plain(tomllib.loads(FILES[0])) is not None
    assert _plain(tomllib.loads(FILES[4])) is not None
    assert _plain(tomllib.loads(FILES[5])) is not None  # a cached input price is read plainly too
    assert _plain(tomllib.loads(FILES[7])) is None  # "12" is converted by the full check, not here
