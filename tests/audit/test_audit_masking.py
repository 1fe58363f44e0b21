"""Masking self-identifying strings: models, vendors and self-descriptions go; art and culture stay readable."""

from __future__ import annotations

import pytest

from cfkit.audit.masking import MODEL_MARK, SELF_MARK, VENDOR_MARK, mask_identity, model_name_patterns

RUNS = ["openai:gpt-5.5", "openai:Qwen/Qwen3-VL-8B-Instruct", "hf:/home/me/models/my-vlm"]


@pytest.mark.parametrize("text, expected", [
    ("As an AI model developed by OpenAI, I think the cup is brown.", f"{SELF_MARK}, I think the cup is brown."),
    ("As a large language model trained by Google DeepMind, I see snow.", f"{SELF_MARK}, I see snow."),
    ("I'm a large language model trained by Alibaba Cloud. The cup is brown.",
     f"{SELF_MARK}. The cup is brown."),
    ("I am Claude, and the wreath is black.", f"{SELF_MARK}, and the wreath is black."),
    ("As Gemini, I note a moon.", f"{SELF_MARK}, I note a moon."),
    ("gpt-5.5 says no; GPT 5.5 agrees; GPT5.5 too.", f"{MODEL_MARK} says no; {MODEL_MARK} agrees; {MODEL_MARK} too."),
    ("Qwen3-VL-8B-Instruct reads the sign.", f"{MODEL_MARK} reads the sign."),
    ("Claude Opus 4.6 and Gemini 3.1 Pro differ; Llama-3.2 too.", f"{MODEL_MARK} and {MODEL_MARK} differ; {MODEL_MARK} too."),
    ("ChatGPT's answer, by Anthropic's rules.", f"{MODEL_MARK}'s answer, by {VENDOR_MARK}'s rules."),
    ("my-vlm thinks the scene is calm.", f"{MODEL_MARK} thinks the scene is calm."),
])
def test_self_identifying_strings_are_masked(text, expected):
    assert mask_identity(text, models=RUNS).text == expected


@pytest.mark.parametrize("text", [
    "Claude Monet's water lilies and a Claude Lorrain harbour at sunset.",
    "The Gemini constellation is painted above a llama grazing in the field.",
    "Shakespeare's Sonnet 18 and Beethoven's Opus 27 suit a Florence Renaissance theme.",
    "A bard sings under a mistral wind; the models wear silk.",
    "The figure is painted as Claude Monet painted his garden.",
])
def test_art_and_culture_are_left_alone(text):
    masked = mask_identity(text, models=RUNS)
    assert (masked.text, masked.count) == (text, 0)


def test_the_count_says_how_many_strings_were_masked_and_extras_are_masked_too():
    masked = mask_identity("As GPT-5.5 by OpenAI, Project Falcon says yes.", models=RUNS, extra=["Project Falcon"])
    assert masked.count == 3
    assert "OpenAI" not in masked.text and "GPT" not in masked.text and "Falcon" not in masked.text


def test_model_name_patterns_take_the_name_and_a_hub_organisation_but_no_folder():
    assert model_name_patterns("openai:Qwen/Qwen3-VL-8B") == [r"Qwen3[\s_-]*VL[\s_-]*8B", "Qwen"]
    assert model_name_patterns("hf:/home/me/models/my-vlm") == [r"my[\s_-]*vlm"]
    assert model_name_patterns("baseline:no") == []  # too short to mask without hitting ordinary words
