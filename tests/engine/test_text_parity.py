"""engine.text against OmniVoice 0.2.1's own utils/text.py, run in .ref-envs/torchaudio."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from audiocpp.engine.text import add_punctuation, chunk_text_punctuation
from audiocpp.engine.text import punctuation as P
from tests.engine.test_text_chunking import _ALPHABET, OMNIVOICE_CASES
from tests.support import run_reference

pytestmark = pytest.mark.parity

REFERENCE = Path(__file__).resolve().parent / "reference"

PARAGRAPHS = [
    "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly "
    "normal, thank you very much. They were the last people you'd expect to be involved in anything "
    "strange or mysterious, because they just didn't hold with such nonsense. Mr. Dursley was the "
    "director of a firm called Grunnings, which made drills.",
    "The meeting is on Jan. 5 at 3 p.m. at 221B Baker St. near Gen. Foods Inc.; bring your ID (e.g. a "
    "passport, i.e. something official). Prof. X vs. Dr. Y: who wins?! \"Nobody,\" said Capt. Z. 'Really?' "
    "Yes... truly. Approx. 3.5 km away, see fig. 2 and No. 7.",
    "今天天气很好，我们去公园散步吧！你觉得怎么样？好啊；不过要早点回来：晚上还有事。“真的吗？”他问。"
    "【注意】明天下雨。《红楼梦》是一部小说。",
    "Hello 世界. This is mixed text, 包含中文和English words! Does it split? 当然。OK.",
    "No punctuation at all in this fairly long sentence that simply keeps going on and on without stopping",
    "  Leading spaces.   Multiple   spaces here.\nNew line there.\n\nParagraph two!  ",
]


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for text, chunk_len, min_len, _ in OMNIVOICE_CASES:
        cases.append({"fn": "chunk", "text": text, "chunk_len": chunk_len, "min_chunk_len": min_len})
    for text in PARAGRAPHS:
        for chunk_len in (1, 10, 25, 40, 80, 150, 1000):
            for min_len in (None, 3, 20):
                cases.append({"fn": "chunk", "text": text, "chunk_len": chunk_len, "min_chunk_len": min_len})
    rng = random.Random(7)
    for _ in range(600):
        text = "".join(rng.choice(_ALPHABET + ["Mr.", "No.", "vs.", "Sept.", "fig.", "i.e.", "」", "》",
                                               "】"])
                       for _ in range(rng.randint(0, 120)))
        cases.append({"fn": "chunk", "text": text, "chunk_len": rng.randint(1, 60),
                      "min_chunk_len": rng.choice([None, rng.randint(0, 15)])})
    for text in ["hello", " hi ", "你好", "你好hello", "done.", "ok……", "x）", "”", "", "   ", "a、", "why?",
                 "end'", "stop;", "tab\t", "émigré"]:
        cases.append({"fn": "punct", "text": text})
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("text-parity")
    (work / "cases.json").write_text(json.dumps(CASES, ensure_ascii=False), encoding="utf-8")
    return run_reference("torchaudio", REFERENCE / "text_jobs.py", work / "cases.json")


def test_constants_match_upstream(upstream: dict[str, Any]) -> None:
    constants = upstream["constants"]
    assert sorted(P.SPLIT_PUNCTUATION) == constants["SPLIT_PUNCTUATION"]
    assert sorted(P.CLOSING_MARKS) == constants["CLOSING_MARKS"]
    assert sorted(P.END_PUNCTUATION) == constants["END_PUNCTUATION"]
    assert sorted(P.ABBREVIATIONS) == constants["ABBREVIATIONS"]


def test_chunk_text_punctuation_matches_upstream(upstream: dict[str, Any]) -> None:
    mismatches = []
    for case, expected in zip(CASES, upstream["results"]):
        if case["fn"] != "chunk":
            continue
        got = chunk_text_punctuation(case["text"], case["chunk_len"], case["min_chunk_len"])
        if got != expected:
            mismatches.append((case, got, expected))
    assert not mismatches, mismatches[:3]
    assert sum(case["fn"] == "chunk" for case in CASES) > 700


def test_add_punctuation_matches_upstream(upstream: dict[str, Any]) -> None:
    for case, expected in zip(CASES, upstream["results"]):
        if case["fn"] == "punct":
            assert add_punctuation(case["text"]) == expected, case
