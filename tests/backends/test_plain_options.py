"""Options read without pydantic (cfkit.options.PlainSpec) agree with the pydantic model they stand in for.

The openai backend's options and the model controls are read plainly on a run's path to its first request; a
value the plain reading takes must come out exactly as the model would hold it (the same value and type), and
whatever it does not take goes to the model, whose refusals stay as they were.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfkit.backends import cache_options, load_backend
from cfkit.backends.controls import CONTROL_KEYS, NO_CONTROLS, ModelControls, split_controls
from cfkit.backends.openai_chat import OpenAIBackend
from cfkit.backends.openai_options import PLAIN_OPTIONS
from cfkit.errors import OptionError
from cfkit.options import PlainOptions, validate_options, validate_plugin_options

MODEL = OpenAIBackend.Options


def _typed(value):
    """A value with its type spelled out, so 30 and 30.0 differ."""
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _model_reading(values):
    from pydantic import ValidationError

    try:
        return MODEL.model_validate(values).model_dump()
    except ValidationError:
        return None


def _agrees(values) -> bool:
    """The plain reading of ``values`` is the model's, or the plain reading declines them."""
    plain = PLAIN_OPTIONS.read(values)
    if plain is None:
        return True
    model = _model_reading(values)
    assert model is not None, f"plain reading took {values!r}, the model refuses it"
    assert {k: _typed(v) for k, v in plain.model_dump().items()} == {k: _typed(v) for k, v in model.items()}, values
    return True


def test_the_spec_declares_the_model_s_fields_in_order_with_its_defaults_and_identity():
    assert list(PLAIN_OPTIONS.fields) == list(MODEL.model_fields)
    for name, field in PLAIN_OPTIONS.fields.items():
        info = MODEL.model_fields[name]
        assert _typed(field.default) == _typed(info.default), name
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        assert field.cache == extra.get("cache", True), name
    assert _agrees({})
    assert PLAIN_OPTIONS.read({}).model_dump() == MODEL.model_validate({}).model_dump()


NUMBER_TEXTS = ["0", "1", "30", "30.5", "0.25", "3600", "3600.0", "3600.5", "3601", "20", "21", "4", "-1", "-0",
                "007", "0.", ".5", "1e3", "1E3", " 30", "30 ", "+30", "1_000", "inf", "-inf", "nan", "NaN", "",
                "abc", "0x10", "١٢", "99999999999999999999", "1" * 40, "4.0"]
VALUES = [None, True, False, 0, 1, 4, 20, 21, -1, 3600, 3601, 0.0, -0.0, 0.5, 120.0, 3600.0, 3600.5, float("inf"),
          float("nan"), 2 ** 60, 10 ** 30, 1e300, "auto", "off", "low", "high", "AUTO", "max_tokens",
          "max_completion_tokens", "http://127.0.0.1:8000/v1", ["http://a/v1", "http://b/v1"], [], ("x",), ["x", 1],
          {"a": 1}, b"auto", *NUMBER_TEXTS]


@pytest.mark.parametrize("name", list(PLAIN_OPTIONS.fields))
def test_each_field_reads_plainly_only_what_the_model_holds_the_same(name):
    taken = [value for value in VALUES if PLAIN_OPTIONS.read({name: value}) is not None]
    for value in VALUES:
        assert _agrees({name: value})
    assert taken  # every field reads something plainly (at least its default's kind)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["timeout", "max_retries", "backoff", "price_in"]),
       text=st.text(alphabet="0123456789.-+e_ infa", max_size=8))
def test_number_texts_read_plainly_as_the_model_reads_them(name, text):
    assert _agrees({name: text})


def test_a_value_not_plainly_right_is_refused_by_the_model_with_its_own_line():
    for values in ({"timeout": "0"}, {"timeout": "abc"}, {"detail": "AUTO"}, {"max_retries": "21"}, {"nope": "1"}):
        with pytest.raises(OptionError) as plain_path:
            validate_plugin_options(OpenAIBackend, values, what="backend 'openai'", see="cfkit probe backends")
        with pytest.raises(OptionError) as model_path:
            validate_options(MODEL, values, what="backend 'openai'", see="cfkit probe backends")
        assert str(plain_path.value) == str(model_path.value)
    # A value the model converts that the plain reading leaves to it: the model's reading is used.
    read = validate_plugin_options(OpenAIBackend, {"timeout": "1e2"}, what="backend 'openai'", see="x")
    assert not isinstance(read, PlainOptions) and read.timeout == 100.0


@pytest.mark.parametrize("given_options", [
    {"base_url": "http://127.0.0.1:9/v1"},
    {"base_url": "http://user:secret@127.0.0.1:9/v1", "timeout": "30", "max_retries": "2", "detail": "low",
     "price_in": "1.25", "price_out": 10, "json_schema": "off", "token_param": "max_tokens", "backoff": "0"},
    {"base_url": ["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"]},
])
def test_a_backend_built_from_plain_options_is_the_one_built_from_the_model(given_options, monkeypatch):
    """What a run records and keys on (options, cache identity, endpoint) is the same either way."""
    plain = load_backend("openai:m", given_options)
    assert isinstance(plain.options, PlainOptions)
    validated = validate_options(MODEL, given_options, what="backend 'openai'", see="x")
    full = OpenAIBackend("m", validated)
    assert plain.options.model_dump(mode="json") == full.options.model_dump(mode="json")
    assert plain.cache_identity == full.cache_identity
    assert cache_options(plain.options) == cache_options(full.options)
    assert (plain.endpoint, plain.priced, plain.token_param) == (full.endpoint, full.priced, full.token_param)
    with pytest.raises(AttributeError):
        plain.options.timeout = 3  # frozen, as the model is


def test_no_controls_given_reads_as_the_model_s_empty_controls():
    empty = ModelControls()
    assert list(ModelControls.model_fields) == list(CONTROL_KEYS)
    assert {key: getattr(NO_CONTROLS, key) for key in CONTROL_KEYS} == empty.model_dump()
    controls, rest = split_controls({"timeout": "3"}, ("temperature",), kind="openai")
    assert controls is NO_CONTROLS and rest == {"timeout": "3"}
    controls, _ = split_controls({"temperature": "0.5"}, ("temperature",), kind="openai")
    assert isinstance(controls, ModelControls) and math.isclose(controls.temperature, 0.5)
