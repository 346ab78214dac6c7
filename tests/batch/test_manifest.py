"""The manifest is checked line by line before anything runs; `--check` does only that. Also the
pieces that need no model: the voice-first dispatch order, the progress line, a missing Ray."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.batch.local import Dispatcher
from audiocpp.batch.manifest import Defaults, Item, read_manifest
from audiocpp.batch.progress import BatchProgress
from audiocpp.engine.errors import UsageError
from audiocpp.engine.registry import get_family
from tests.support import run_cli

from .common import write_manifest

SPEC = get_family("omnivoice").spec


def _problems(tmp_path: Path, lines: list[str], defaults: Defaults | None = None) -> str:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        read_manifest(path, SPEC, defaults or Defaults())
    return caught.value.message


def test_every_bad_line_is_reported_with_its_number(tmp_path: Path) -> None:
    (tmp_path / "here.wav").write_bytes(b"")
    sf.write(tmp_path / "long.wav", np.zeros(25 * 8000, dtype=np.float32), 8000)
    message = _problems(tmp_path, [
        '{"id": "ok", "text": "fine", "task": "clon", "voice_ref": "here.wav", "reference_text": "x"}',
        '{"id": "b", "text": "x", "colour": "red"}',
        '{"id": "c", "text": "x", "task": "clon", "voice_ref": "missing.wav"}',
        '{"id": "d", "text": "unterminated',
        '',
        '{"id": "ok", "text": "duplicate id"}',
        '{"id": "e", "text": "x", "options": {"num_inference_steps": 0}}',
        '{"id": "f", "text": "x", "options": {"no_such_option": 1}}',
        '{"id": "../g", "text": "x"}',
        '{"id": "h", "text": "  "}',
        '{"id": "i", "text": "x", "out": "i.mp3"}',
        '{"id": "j", "text": "x", "seed": 3, "options": {"seed": 4}}',
        '{"id": "k", "text": "x", "seed": "7"}',
        '{"id": "l", "text": "x", "task": "sing"}',
        '{"id": "m", "text": "x", "voice_prompt": "no-prompt.pt"}',
        '{"id": "n", "text": "x", "out": "sub/n.wav"}',
        '{"id": "o", "text": "x", "out": "ok.wav"}',
        '[1, 2]',
        '{"id": "p", "text": "x", "voice_ref": "here.wav"}',
        '{"id": "q", "text": "x", "task": "clon", "voice_ref": "here.wav", "voice_prompt": "here.wav"}',
        '{"id": "r", "text": "x", "task": "design", "reference_text": "words"}',
        '{"id": "s", "text": "x", "task": "clon", "voice_ref": "long.wav", "reference_text": "words"}',
    ])
    assert "has 20 bad lines; nothing was synthesized" in message
    expected = {
        2: "unknown field 'colour'",
        3: "voice_ref 'missing.wav' does not exist",
        4: "not valid JSON",
        6: "id 'ok' is already used on line 1",
        7: "request option num_inference_steps: 0 is below the minimum 1",
        8: "omnivoice has no request option 'no_such_option'",
        9: "id '../g' cannot name a file",
        10: "text is missing or empty",
        11: "out 'i.mp3': use a .wav, .flac or .ogg file name",
        12: "seed is given twice with different values",
        13: "seed must be an integer",
        14: "unknown task 'sing'",
        15: "voice_prompt 'no-prompt.pt' does not exist",
        16: "out 'sub/n.wav' must be a plain file name",
        17: "out 'ok.wav' is already written by line 1",
        18: "expected a JSON object",
        19: "task 'tts' takes no reference audio",
        20: "give either voice_ref or voice_prompt, not both",
        21: "reference_text needs voice_ref",
        22: "the reference audio",
    }
    for number, text in expected.items():
        assert f"line {number}: {text}" in message, (number, message)
    assert "long.wav' is 25.0 s long, over the 20 s cap" in message
    for flag in ("--voice-ref", "--reference-text", "--voice-prompt", "--request-option", "--task"):
        assert flag not in message, (flag, message)  # a line's fields, not the command line's flags
    assert "line 1:" not in message and "line 5:" not in message


def test_voice_speed_and_phonemes_fields(tmp_path: Path) -> None:
    """voice (a named voice or mix), speed and phonemes are request options given as fields: a family
    without them refuses them by name (the old prompt meaning of voice is voice_prompt now)."""
    message = _problems(tmp_path, [
        '{"id": "t", "text": "x", "voice": "my.prompt"}',
        '{"id": "u", "text": "x", "phonemes": true}',
        '{"id": "v", "text": "x", "speed": "fast"}',
        '{"id": "w", "text": "x", "speed": 0}',
        '{"id": "x", "text": "x", "speed": 1.5, "options": {"speed": 2}}',
    ])
    assert "has 5 bad lines" in message
    for number, text in {
        1: "voice names one of the model's own voices, and omnivoice has none (a saved voice prompt file is "
           "the field voice_prompt)",
        2: "omnivoice has no request option 'phonemes' (field phonemes)",
        3: "speed must be a number",
        4: "request option speed: 0.0 is below the minimum 0.05",
        5: "speed is given twice with different values (2 in options and 1.5)",
    }.items():
        assert f"line {number}: {text}" in message, (number, message)
    kokoro = get_family("kokoro").spec
    path = write_manifest(tmp_path / "k.jsonl", [
        {"id": "a", "text": "Hello.", "voice": "af_heart(2)+jf_alpha(1)", "speed": 1.25},
        {"id": "b", "text": "həlˈO.", "phonemes": True, "options": {"voice": "jm_kumo"}},
        {"id": "c", "text": "Hi."},
    ])
    a, b, c = read_manifest(path, kokoro, Defaults(voice="jf_alpha", speed=0.9))
    assert a.options == {"voice": "af_heart(2)+jf_alpha(1)", "speed": 1.25}  # the line's fields win
    assert b.options == {"voice": "jm_kumo", "speed": 0.9, "phonemes": True}
    assert c.options == {"voice": "jf_alpha", "speed": 0.9} and c.voice_key[3] == "jf_alpha"
    assert (a.words_out, c.words_out) == ("a.words.json", "c.words.json")
    path.write_text('{"id": "a", "text": "x", "out": "same.wav"}\n'
                    '{"id": "b", "text": "x", "out": "same.flac"}\n'
                    '{"id": "c", "text": "x", "phonemes": "yes"}\n', encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        read_manifest(path, kokoro, Defaults())
    assert ("line 2: out 'same.flac': its word timings 'same.words.json' are already written by line 1"
            in caught.value.message)
    assert "line 3: phonemes must be true or false" in caught.value.message


def test_defaults_fill_what_a_line_leaves_out(tmp_path: Path) -> None:
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "v.wav").write_bytes(b"")
    default_ref = tmp_path / "default.wav"
    default_ref.write_bytes(b"")
    path = write_manifest(tmp_path / "m.jsonl", [
        {"id": "a", "text": "Hello."},
        {"id": 7, "text": "Hi.", "task": "design", "seed": 3, "instruct": "male", "options": {"speed": 1.5},
         "out": "seven.flac"},
        {"id": "c", "text": "Clone.", "task": "clon", "voice_ref": "refs/v.wav", "reference_text": "ref"},
    ])
    defaults = Defaults(task="clon", voice_ref=default_ref, reference_text="default text", seed=9,
                        options={"num_inference_steps": "8"}, fmt="wav32")
    items = read_manifest(path, SPEC, defaults)
    a, seven, c = items
    assert (a.task, a.seed, a.voice_ref, a.reference_text) == ("clone", 9, str(default_ref.resolve()),
                                                               "default text")
    assert (a.out, a.fmt, a.options) == ("a.wav", "wav32", {"num_inference_steps": "8"})
    assert (seven.id, seven.task, seven.seed, seven.out, seven.fmt) == ("7", "design", 3, "seven.flac",
                                                                        "flac")
    assert seven.voice_ref is None and seven.reference_text is None  # voice defaults are for clones only
    assert seven.options == {"num_inference_steps": "8", "speed": 1.5}
    assert c.voice_ref == str((tmp_path / "refs" / "v.wav").resolve())  # relative to the manifest's folder
    assert Item.from_json(c.to_json()) == c


def test_a_lines_out_picks_the_container_and_format_the_sample_type(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "m.jsonl", [{"id": "a", "text": "x", "out": "a.wav"},
                                                 {"id": "b", "text": "x", "out": "b.FLAC"},
                                                 {"id": "c", "text": "x"}])
    assert [(i.out, i.fmt) for i in read_manifest(path, SPEC, Defaults(fmt="wav24"))] == [
        ("a.wav", "wav24"), ("b.FLAC", "flac"), ("c.wav", "wav24")]
    assert [(i.out, i.fmt) for i in read_manifest(path, SPEC, Defaults(fmt="ogg"))] == [
        ("a.wav", "wav16"), ("b.FLAC", "flac"), ("c.ogg", "ogg")]


def test_cli_reports_bad_lines_before_running_and_writes_nothing(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "text": "fine"}\n'
                        '{"id": "b", "text": "x", "voice_ref": "gone.wav"}\n{oops\n')
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--family", "omnivoice", "--out-dir", out)
    assert proc.returncode == 2
    assert "has 2 bad lines; nothing was synthesized" in proc.stderr
    assert ("line 2: voice_ref 'gone.wav' does not exist" in proc.stderr
            and "line 3: not valid JSON" in proc.stderr)
    assert "Traceback" not in proc.stderr and not out.exists()


def test_a_line_that_is_not_utf8_is_reported_with_the_others(tmp_path: Path) -> None:
    """One latin-1 byte makes its line bad, not the whole manifest: every other problem still shows."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'{"id": "a", "text": "fine"}\n{"id": "b", "text": "caf\xe9"}\n'
                         b'{"id": "c", "text": "x", "colour": "red"}\n{"id": "d", "text": "ok"}\n')
    proc = run_cli("batch", manifest, "--family", "omnivoice", "--check")
    assert proc.returncode == 2 and "has 2 bad lines" in proc.stderr, proc.stderr
    assert "line 2: not UTF-8 text (byte 0xe9 at byte 25 of the line)" in proc.stderr
    assert "line 3: unknown field 'colour'" in proc.stderr and "Traceback" not in proc.stderr


def test_check_only_checks(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl",
                              [{"id": "a", "text": "Hello."}, {"id": "b", "text": "Hi."}])
    proc = run_cli("batch", manifest, "--family", "omnivoice", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "manifest ok: 2 items, 0 distinct voices" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]


@pytest.mark.parametrize("flags, message", [
    ([], "no output folder"),
    (["--out-dir", "o", "--workers", "0"], "--workers 0 must be at least 1"),
    (["--out-dir", "o", "--format", "mp3"], "--format 'mp3' is not supported"),
    (["--out-dir", "o", "--session-option", "omnivoice.nope=1"], "omnivoice has no session option"),
])
def test_bad_flags(flags: list[str], message: str, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "a", "text": "Hello."}])
    proc = run_cli("batch", manifest, "--family", "omnivoice", *flags, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from audiocpp.batch.ray_runner import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray looks like
    with pytest.raises(UsageError) as caught:
        import_ray()
    assert "pip install 'audiocpp[ray]'" in (caught.value.hint or "")


def _item(item_id: str, voice: str | None, text: str = "x") -> Item:
    return Item(id=item_id, line=0, index=0, text=text, task="clone" if voice else "tts",
                out=f"{item_id}.wav", fmt="wav16", voice_ref=voice)


def test_dispatch_keeps_a_worker_on_its_voice() -> None:
    items = [_item("a1", "/a.wav"), _item("n1", None), _item("b1", "/b.wav", "longer"),
             _item("a2", "/a.wav", "xx"), _item("b2", "/b.wav"), _item("a3", "/a.wav", "xxx")]
    dispatcher = Dispatcher(items)
    w1, item = dispatcher.next(None)
    assert item.id == "a1"  # clones first, by voice, shortest first
    w2, item = dispatcher.next(None)
    assert item.id == "b2"  # the second worker starts a voice nobody has started
    order = []
    for _ in range(3):  # worker 1 stays on voice a, then takes the untouched tts group
        w1, item = dispatcher.next(w1)
        order.append(item.id)
    assert order == ["a2", "a3", "n1"]
    w2, item = dispatcher.next(w2)
    assert item.id == "b1"
    assert dispatcher.next(w2) is None and dispatcher.next(w1) is None


def test_dispatch_helps_the_largest_group_once_all_are_started() -> None:
    items = [_item(f"a{n}", "/a.wav", "x" * n) for n in range(1, 5)] + [_item("b1", "/b.wav")]
    dispatcher = Dispatcher(items)
    w1, _ = dispatcher.next(None)
    w2, _ = dispatcher.next(None)
    assert dispatcher.next(w2)[1].id == "a2"  # voice b is done: help with voice a


def test_progress_line_has_rate_and_eta() -> None:
    stream = io.StringIO()
    bar = BatchProgress(4, enabled=True, stream=stream)
    bar.start()
    bar.advance(True)
    bar.advance(False)
    line = bar.line()
    assert "2/4" in line and "items/s" in line and "ETA" in line and "1 failed" in line
    assert "\r" in stream.getvalue()
    bar.close()
    quiet = io.StringIO()
    BatchProgress(4, stream=quiet).advance(True)  # not a terminal: nothing drawn
    assert quiet.getvalue() == ""
