"""What the fuzzers found in option parsing and voice-prompt files, kept as exact inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from audiocpp.engine.errors import UsageError
from audiocpp.engine.spec import load_spec_file, resolve_options
from audiocpp.engine.voice_prompt import CodecPrompt, read_prompt_dict

REPO = Path(__file__).resolve().parents[2]


def test_a_path_option_naming_an_unknown_users_home_is_a_usage_error() -> None:
    """``codec=~0``: Path.expanduser raised RuntimeError ("Could not determine home directory")."""
    spec = load_spec_file(REPO / "model_specs" / "omnivoice.json")
    with pytest.raises(UsageError, match="no such user's home folder"):
        resolve_options(spec, "load", {"codec": "~nosuchuser0/codec"})


def _prompt(path: Path, **data: Any) -> Path:
    torch.save({"format_version": 1, "ref_text": "x", **data}, path)
    return path


@pytest.mark.parametrize("data, words", [
    ({"family": torch.ones(3)}, "its family is Tensor"),  # `tensor != "voxcpm2"` was ambiguous (RuntimeError)
    ({"format_version": torch.ones(2)}, "unsupported format version"),
    ({"format_version": True}, "unsupported format version"),
])
def test_engine_prompt_keys_of_the_wrong_type(tmp_path: Path, data: dict, words: str) -> None:
    path = _prompt(tmp_path / "p.prompt", **data)
    with pytest.raises(UsageError, match=words):
        read_prompt_dict(path, family="voxcpm2")


@pytest.mark.parametrize("rate", ["omnivoice", torch.ones(2), float("nan"), [1]])
def test_prompt_rates_of_the_wrong_type(tmp_path: Path, rate: object) -> None:
    """``int(data["sample_rate"])`` of a string (ValueError) or a tensor (RuntimeError)."""
    from audiocpp.families.omnivoice.voice import OmniVoicePrompt

    path = _prompt(tmp_path / "p.prompt", family="omnivoice", sample_rate=rate, frame_rate=25.0, ref_rms=0.1,
                   ref_audio_tokens=torch.ones(8, 4, dtype=torch.long))
    with pytest.raises(UsageError, match="sample_rate"):
        CodecPrompt.load(path, family="omnivoice")
    with pytest.raises(UsageError, match="sample_rate"):
        OmniVoicePrompt.load(path)


def test_complex_codes_are_refused(tmp_path: Path, tiny_models: dict[str, Any]) -> None:
    """``codes < 0`` is not implemented for complex tensors (NotImplementedError)."""
    for family in ("omnivoice", "audio8_tts"):
        model = tiny_models[family]
        books = (model.parts.codec.cfg.num_codebooks if family == "audio8_tts"
                 else model.cfg.num_audio_codebook)
        path = _prompt(tmp_path / f"{family}.prompt", family=family, ref_rms=0.1,
                       ref_audio_tokens=torch.ones(books, 4, dtype=torch.complex64))
        with pytest.raises(UsageError, match="ref_audio_tokens"):
            model.load_voice_prompt(path)


def test_a_legacy_prompt_claiming_a_huge_string_is_refused(tmp_path: Path) -> None:
    """Prompt files go through the weights reader's bounded torch.load too."""
    import io

    from .harness import check

    buf = io.BytesIO()
    torch.save({"format_version": 1, "ref_text": "x"}, buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    at = data.index(b"X\x0e\x00\x00\x00format_version")
    path = tmp_path / "long.prompt"
    path.write_bytes(data[:at] + b"X\xff\xff\xff\x7f" + data[at + 5:])
    outcome = check("regression", lambda: read_prompt_dict(path), files=[path])
    assert isinstance(outcome, UsageError)


def test_srt_cue_numbers_are_ascii_digits() -> None:
    """"³".isdigit() is true, int("³") a ValueError; 5000 digits exceed int()'s limit."""
    from audiocpp.engine.text.srt import parse_srt

    for number in ("³", "1" * 5000):
        with pytest.raises(UsageError, match="expected a cue number"):
            parse_srt(f"{number}\n00:00:01,000 --> 00:00:02,000\nHello.\n")


def test_manifest_lines_that_break_json_loads(tmp_path: Path) -> None:
    """A 5000-digit number (ValueError) or 50 000 brackets (RecursionError) on one line; a path
    of an unknown user's home (RuntimeError), a file name too long (OSError): each a bad line."""
    from batch.manifest import Defaults, read_manifest

    spec = load_spec_file(REPO / "model_specs" / "omnivoice.json")
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([
        '{"id": "a", "text": "x", "seed": ' + "1" * 5000 + "}",
        "[" * 50_000,
        '{"id": "b", "text": "x", "task": "clon", "reference_text": "hi", "voice_ref": "~nosuchuser0/x.wav"}',
        '{"id": "c", "text": "x", "task": "clon", "reference_text": "hi", "voice_ref": "' + "a" * 5000
        + '.wav"}',
    ]))
    with pytest.raises(UsageError, match="has 4 bad lines") as caught:
        read_manifest(path, spec, Defaults())
    for line in ("line 1: not valid JSON", "line 2: not valid JSON", "line 3:", "line 4:"):
        assert line in caught.value.message


def test_paths_the_system_refuses_are_simply_not_there(tmp_path: Path) -> None:
    """pathlib's exists()/is_file() raise OSError (ENAMETOOLONG) for a 5000-byte name in Python
    3.11; every reader of a user's path says "does not exist" instead."""
    from audiocpp.engine.audio.io import read_audio
    from audiocpp.engine.errors import AudioError, ModelError
    from audiocpp.engine.text.srt import read_srt
    from audiocpp.engine.weights import open_weights

    long = tmp_path / ("a" * 5000)
    for call, error in ((lambda: read_audio(long), AudioError), (lambda: open_weights(long), ModelError),
                        (lambda: read_srt(long), UsageError), (lambda: read_prompt_dict(long), UsageError)):
        with pytest.raises(error, match="does not exist"):
            call()
    spec = load_spec_file(REPO / "model_specs" / "voxcpm2.json")
    with pytest.raises(UsageError, match="does not exist"):
        resolve_options(spec, "request", {"prompt_audio": str(long)})
