"""Fuzz the batch manifest (JSONL lines of any JSON, fields of any type, paths that do not
exist or name no user, huge numbers, deep nesting, lines that are not UTF-8) and the SRT parser
(mutated valid subtitles, timings of any shape, any Unicode): one UsageError listing the
problems, or the parsed items.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from audiocpp.engine.spec import load_spec_file

from .harness import REPO, check, fuzz_settings
from .mutate import INTERESTING, mutated

FIELDS = ("id", "text", "task", "voice_ref", "reference_text", "voice", "instruct", "language", "seed",
          "options", "out")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from(INTERESTING),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
                    st.sampled_from(["", "tts", "clon", "clone", "design", "~nosuchuser/x.wav", "a\0b",
                                     "../x.wav", "/etc/passwd", "x.wav", "x.flac", "x.mp3", ".hidden.wav",
                                     "manifest.jsonl", "a/b.wav", "a" * 300, "1" * 5000, "seed", "en"]))
PATHS = st.sampled_from(["~nosuchuser/x.wav", "~/x.wav", "a\0b.wav", "../x.wav", "/etc/passwd", "/", "", ".",
                         "x.wav", "a" * 5000 + ".wav", "/proc/self/mem", "/dev/zero", "\u202ex.wav"])
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=8)


@st.composite
def manifest_line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=40))
    if kind == 1:
        return draw(st.sampled_from(["[" * 50_000, "9" * 5000, '{"id": ' + "1" * 5000 + ', "text": "x"}',
                                     "null", "{}", '{"id": "a", "text": "x"} trailing',
                                     '{"id": "a"' + ', "id": "b"' * 3 + "}"]))
    line: dict[str, Any] = {"id": draw(st.one_of(st.integers(0, 9), st.text(min_size=1, max_size=4))),
                            "text": draw(st.text(min_size=1, max_size=20))}
    for _ in range(draw(st.integers(0, 3))):
        line[draw(st.sampled_from([*FIELDS, "bogus"]))] = draw(JSON)
    if draw(st.integers(0, 2)) == 0:  # a clone line with a hostile path
        line.update(task="clon", reference_text="hi")
        line[draw(st.sampled_from(["voice_ref", "voice", "out"]))] = draw(PATHS)
    if draw(st.integers(0, 3)) == 0:
        line["options"] = draw(st.dictionaries(st.sampled_from(["seed", "speed", "num_step", "guidance_scale",
                                                                "codec", "denoise", "x", "instruct"]), JSON,
                                               max_size=3))
    return json.dumps(line)


@cache
def specs() -> list:
    return [load_spec_file(REPO / "model_specs" / f"{name}.json")
            for name in ("omnivoice", "voxcpm2", "audio8_tts")]


@given(st.lists(manifest_line(), min_size=0, max_size=6), st.sampled_from([0, 1, 2]), st.booleans())
@fuzz_settings("manifest")
def test_manifests(fuzz_dir: Path, lines: list[str], which: int, raw_bytes: bool) -> None:
    from batch.manifest import Defaults, read_manifest

    path = fuzz_dir / "manifest.jsonl"
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if raw_bytes:
        data += b"\n\xff\xfe{bad utf-8}"
    path.write_bytes(data)
    check("manifest", lambda: read_manifest(path, specs()[which], Defaults()), files=[path])


# -- SRT --------------------------------------------------------------------------------------
SRT_SEED = (
    "1\n00:00:01,000 --> 00:00:02,500\nHello <i>there</i>.\n\n"
    "2\n00:00:03,000 --> 00:00:04,000 X1:40 X2:600\n{\\an8}Second line\nand more\n\n"
    "3\n00:01:00.5 --> 00:01:02.25\n你好，世界。\n"
)
TIMES = st.one_of(st.from_regex(r"\d{1,3}:\d{2}:\d{2}[,.]\d{1,3}", fullmatch=True),
                  st.sampled_from(["99:59:59,999", "00:00:00,000", "1:60:00,000", "0:00:61,0", "٠٠:٠٠:٠١,٠٠٠",
                                   "00:00:01,0000", "-1:00:00,000", "00:00:01"]))


@st.composite
def srt_texts(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 2)) == 0:
        return draw(mutated({"srt": SRT_SEED.encode()}, max_edits=4))[1].decode("utf-8", "replace")
    cues = []
    for i in range(draw(st.integers(0, 5))):
        number = draw(st.one_of(st.just(str(i + 1)),
                                st.sampled_from(["", "x", "²", "١", "1" * 5000, "-1", "01", "³"])))
        timing = f"{draw(TIMES)} {draw(st.sampled_from(['-->', '->', '-- >', '→']))} {draw(TIMES)}"
        text = draw(st.text(max_size=20))
        cues.append(f"{number}\n{timing}\n{text}")
    sep = draw(st.sampled_from(["\n\n", "\r\n\r\n", "\n \n", "\n"]))
    return draw(st.sampled_from(["", "\ufeff"])) + sep.join(cues)


@given(srt_texts())
@fuzz_settings("srt")
def test_srt(fuzz_dir: Path, text: str) -> None:
    from audiocpp.engine.text.srt import parse_srt, read_srt

    check("srt", lambda: parse_srt(text))
    path = fuzz_dir / "subs.srt"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    check("srt", lambda: read_srt(path), files=[path])
