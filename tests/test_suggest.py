"""Did-you-mean for every id a user types."""

from __future__ import annotations

import pytest

from cfkit import registry
from cfkit.errors import CaseError, PluginError
from cfkit.suggest import closest, did_you_mean


@pytest.mark.parametrize("typed, choices, meant", [
    ("ex01", ["EX01", "EX02"], "EX01"),          # case only
    ("CF1", ["CF01", "CF18"], "CF01"),           # a digit short
    ("clasical", ["classical", "file"], "classical"),
    ("zzz", ["EX01", "EX02"], None),             # nothing close: no guess
    ("EX0", ["EX01", "EX02"], None),             # two equally close: no guess
])
def test_closest(typed, choices, meant):
    assert closest(typed, choices) == meant


def test_unknown_names_and_ids_suggest_the_likely_one(mini_ws):
    with pytest.raises(PluginError, match="Unknown editor 'Classical'. Did you mean 'classical'?"):
        registry.load(registry.EDITORS, "Classical")
    from cfkit.dataset import load_cases

    cases = load_cases(mini_ws / "cases.jsonl", mini_ws / "images")
    with pytest.raises(CaseError, match="Did you mean 'MX01'"):
        cases.get("mx01")
    assert did_you_mean("qqq", ["MX01"]) == ""
