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


def test_an_id_that_looks_right_but_holds_an_invisible_character_is_told_so(mini_ws):
    assert did_you_mean("MX01\u200b", ["MX01"]) == " It holds an invisible character (U+200B)."
    assert "U+00A0, U+200D" in did_you_mean("M\u00a0X\u200d01", ["MX01"])
