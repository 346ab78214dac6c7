"""A checkpoint folder's config.json with a value of the wrong type or an impossible size: found
by replacing every value of each family's tiny config in turn (262 inputs escaped as TypeError,
ValueError or torch RuntimeError from model building before ``engine.config_values``; odd sizes
later found 4 more in VoxCPM2's DiT and VAE). Every
family's parser now gives one ModelError naming the field; a few go through the whole load."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audiocpp.engine import load
from audiocpp.engine.errors import AudiocppError, ModelError
from audiocpp.engine.registry import get_family

REPO = Path(__file__).resolve().parents[2]
WRONG: tuple[Any, ...] = ("abc", None, [1], {"a": 1}, -1, 0, 1.5, True, 3, 1e999)


def _omnivoice(raw: dict[str, Any]) -> Any:
    from audiocpp.families.omnivoice.config import parse_configs

    folder = get_family("omnivoice").demo_model_path()
    codec = json.loads((folder / "audio_tokenizer" / "config.json").read_text())
    return parse_configs(raw, codec, where="the folder")


def _voxcpm2(raw: dict[str, Any]) -> Any:
    from audiocpp.families.voxcpm2.config import VoxCPMConfig

    return VoxCPMConfig.from_dict(raw)


def _audio8(raw: dict[str, Any]) -> Any:
    from audiocpp.families.audio8_tts.config import Audio8Config

    return Audio8Config.from_dict(raw)


def _voxcpm2_config() -> dict[str, Any]:
    from tools.voxcpm2 import checkpoint

    return json.loads(json.dumps(checkpoint.TINY_V2))


CASES: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], Any]]] = {
    "omnivoice": (lambda: json.loads((get_family("omnivoice").demo_model_path() / "config.json").read_text()),
                  _omnivoice),
    "voxcpm2": (_voxcpm2_config, _voxcpm2),
    "audio8_tts": (lambda: json.loads((REPO / "tests/data/audio8_tts/tiny/config.json").read_text()),
                   _audio8),
}


def _leaves(obj: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            yield from _leaves(value, (*path, key))
    elif path:
        yield path


def _replaced(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(raw))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


@pytest.mark.parametrize("family", sorted(CASES))
def test_every_config_value_replaced_gives_a_config_or_one_model_error(family: str) -> None:
    read, parse = CASES[family]
    raw = read()
    parse(raw)  # the tiny config itself parses
    refused = 0
    for path in _leaves(raw):
        for value in WRONG:
            try:
                parse(_replaced(raw, path, value))
            except ModelError:
                refused += 1
    assert refused > 100


@pytest.mark.parametrize(("family", "path", "value", "words"), [
    ("omnivoice", ("audio_vocab_size",), "abc", "expected an integer"),
    ("omnivoice", ("llm_config", "rms_norm_eps"), [1], "expected a number"),
    ("omnivoice", ("llm_config", "num_hidden_layers"), -1, "llm.num_hidden_layers must be positive"),
    ("voxcpm2", ("lm_config", "num_attention_heads"), -1, "lm.num_attention_heads must be positive"),
    ("voxcpm2", ("audio_vae_config", "encoder_dim"), 1.5, "audio_vae.encoder_dim must be an integer"),
    ("voxcpm2", ("lm_config", "rope_scaling", "short_factor"), [1.0], "needs head_dim/2"),
    ("voxcpm2", ("lm_config", "use_mup"), "false", "expected true or false"),
    ("voxcpm2", ("dit_config", "hidden_dim"), 7, "must be even"),
    ("voxcpm2", ("audio_vae_config", "decoder_dim"), 3, "too small to halve"),
    ("audio8_tts", ("n_layer",), "abc", "n_layer"),
])
def test_a_bad_config_value_is_named(family: str, path: tuple[str, ...], value: Any, words: str) -> None:
    read, parse = CASES[family]
    with pytest.raises(ModelError, match=words):
        parse(_replaced(read(), path, value))


@pytest.mark.parametrize(("family", "path", "value"), [
    ("omnivoice", ("num_audio_codebook",), {"a": 1}),
    ("voxcpm2", ("dit_config", "num_heads"), -1),
    ("audio8_tts", ("dim",), None),
])
def test_loading_a_folder_with_a_bad_config_is_one_model_error(tmp_path: Path, family: str,
                                                              path: tuple[str, ...], value: Any) -> None:
    if family == "voxcpm2":
        from tools.voxcpm2 import checkpoint

        folder = checkpoint.write_checkpoint(tmp_path / "tiny", checkpoint.TINY_V2, seed=1)
    else:
        source = get_family("omnivoice").demo_model_path() if family == "omnivoice" \
            else REPO / "tests/data/audio8_tts/tiny"
        folder = Path(shutil.copytree(source, tmp_path / "tiny"))
    config = folder / "config.json"
    config.write_text(json.dumps(_replaced(json.loads(config.read_text()), path, value)))
    with pytest.raises(AudiocppError) as info:
        load(folder, family=family)
    assert isinstance(info.value, ModelError) and "config.json" in str(info.value)
