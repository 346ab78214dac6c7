"""Option parsing against a spec: types, ranges, allowed values, unknown names, scopes."""

from __future__ import annotations

from pathlib import Path

import pytest

from audiocpp.engine.errors import UsageError
from audiocpp.engine.spec import (
    builtin_spec_path,
    format_options,
    load_spec_file,
    parse_key_values,
    resolve_options,
)


@pytest.fixture(scope="module")
def omnivoice():
    return load_spec_file(builtin_spec_path("omnivoice"))


def test_defaults_are_filled_and_typed(omnivoice) -> None:
    opts = resolve_options(omnivoice, "request", {})
    assert opts["num_inference_steps"] == 32 and isinstance(opts["num_inference_steps"], int)
    assert opts["guidance_scale"] == 2.0
    assert opts["denoise"] is True
    assert opts["duration"] is None and opts["seed"] is None


def test_strings_from_the_cli_are_parsed(omnivoice) -> None:
    opts = resolve_options(omnivoice, "request",
                           {"num_inference_steps": "16", "denoise": "false", "t_shift": "0.2"})
    assert opts["num_inference_steps"] == 16
    assert opts["denoise"] is False
    assert opts["t_shift"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"num_inference_steps": "1.5"}, "not an integer"),
        ({"num_inference_steps": "0"}, "below the minimum 1"),
        ({"guidance_scale": "nan"}, "not a finite number"),
        ({"guidance_scale": "fast"}, "not a number"),
        ({"denoise": "maybe"}, "not a boolean"),
        ({"speed": "100"}, "above the maximum 20"),
    ],
)
def test_bad_values_are_usage_errors(omnivoice, given, message) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_options(omnivoice, "request", given)


def test_unknown_option_lists_the_family_options(omnivoice) -> None:
    with pytest.raises(UsageError) as err:
        resolve_options(omnivoice, "request", {"temperature": "0.7"})
    text = str(err.value)
    assert "no request option 'temperature'" in text
    assert "num_inference_steps" in text and "class_temperature" in text


def test_enum_values_are_checked(omnivoice) -> None:
    assert resolve_options(omnivoice, "session", {"compute_dtype": "bfloat16"})["compute_dtype"] == "bfloat16"
    with pytest.raises(UsageError, match="use one of: float32, float32-stored, bfloat16, float16"):
        resolve_options(omnivoice, "session", {"compute_dtype": "int4"})


@pytest.mark.parametrize("typed, canonical", [
    ("bf16", "bfloat16"), ("BF16", "bfloat16"), ("fp16", "float16"), ("half", "float16"),
    ("fp32", "float32"), ("float", "float32"), ("float32", "float32"), (" Bfloat16 ", "bfloat16"),
])
def test_compute_dtype_takes_the_usual_spellings(omnivoice, typed: str, canonical: str) -> None:
    assert resolve_options(omnivoice, "session", {"compute_dtype": typed})["compute_dtype"] == canonical


def test_a_bad_compute_dtype_lists_the_spellings(omnivoice) -> None:
    with pytest.raises(UsageError) as err:
        resolve_options(omnivoice, "session", {"compute_dtype": "bf8"})
    assert "bf16" in err.value.hint and "half" in err.value.hint


def test_session_options_take_the_family_prefix(omnivoice) -> None:
    assert resolve_options(omnivoice, "session", {"omnivoice.threads": "2"})["threads"] == 2
    with pytest.raises(UsageError, match="belongs to family 'voxcpm2'"):
        resolve_options(omnivoice, "session", {"voxcpm2.threads": "2"})


def test_path_options_must_exist(omnivoice, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        resolve_options(omnivoice, "load", {"codec": str(tmp_path / "missing.gguf")})
    real = tmp_path / "codec.gguf"
    real.write_bytes(b"GGUF")
    assert resolve_options(omnivoice, "load", {"codec": str(real)})["codec"] == real


def test_key_value_parsing() -> None:
    assert parse_key_values(["a=1", "b = x=y"], flag="-r") == {"a": "1", "b": " x=y"}
    with pytest.raises(UsageError, match="key=value"):
        parse_key_values(["seed"], flag="--request-option")


def test_help_table_lists_every_option(omnivoice) -> None:
    text = format_options(omnivoice)
    for row in omnivoice.options.request:
        assert row.name in text
    assert "--session-option omnivoice.NAME=VALUE" in text
