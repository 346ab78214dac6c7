"""OmniVoice's text side: languages, voice-design items, text cleanup, the duration
estimator and the unmask schedule, against upstream's documented values."""

from __future__ import annotations

import pytest

from audiocpp.engine.errors import UsageError
from audiocpp.families.omnivoice.generate import time_steps, unmask_schedule
from audiocpp.families.omnivoice.languages import LANG_IDS, LANG_NAME_TO_ID
from audiocpp.families.omnivoice.prompt_layout import (
    char_weight,
    combine_text,
    estimate_target_tokens,
    resolve_instruct,
    resolve_language,
)
from audiocpp.families.omnivoice.tiny_tokenizer import build_tokenizer


def test_languages_cover_upstream_and_the_spec():
    from audiocpp.engine.registry import get_family

    assert len(LANG_NAME_TO_ID) == 646 and len(LANG_IDS) == 646
    spec = get_family("omnivoice").spec
    assert set(spec.languages) == {"auto", *LANG_IDS}


@pytest.mark.parametrize(("given", "expected"), [
    ("English", "en"), ("english", "en"), ("en", "en"), ("Chinese", "zh"), ("zh", "zh"), ("Japanese", "ja"),
    (None, None), ("None", None), ("auto", None), ("", None),
])
def test_resolve_language(given, expected):
    assert resolve_language(given) == expected


def test_unknown_language_is_a_usage_error_with_suggestions():
    with pytest.raises(UsageError, match="unknown language 'Englsh'") as info:
        resolve_language("Englsh")
    assert "english" in (info.value.hint or "")


@pytest.mark.parametrize(("instruct", "zh", "expected"), [
    ("female, low pitch, british accent", False, "female, low pitch, british accent"),
    ("Female , LOW PITCH", False, "female, low pitch"),
    ("male, elderly", True, "男，老年"),
    ("男，老年", False, "male, elderly"),
    ("男, 河南话", False, "男，河南话"),  # a dialect forces Chinese
    ("女，british accent", True, "female, british accent"),  # an accent forces English
    ("whisper，", False, "whisper"),
    ("  ", False, None),
    (None, False, None),
])
def test_resolve_instruct(instruct, zh, expected):
    assert resolve_instruct(instruct, use_zh=zh) == expected


@pytest.mark.parametrize(("instruct", "match"), [
    ("female, lowpitch", "did you mean 'low pitch'"),
    ("robot voice", "unsupported voice-design item"),
    ("male, female", "conflicting"),
    ("low pitch, high pitch", "conflicting"),
    ("河南话, british accent", "mixes a Chinese dialect and an English accent"),
])
def test_bad_instruct_is_a_usage_error(instruct, match):
    with pytest.raises(UsageError, match=match):
        resolve_instruct(instruct)


def test_combine_text():
    assert combine_text("Hi  there\n", "Hello world") == "Hello world Hi there"
    assert combine_text("你好 世界 （test）") == "你好世界(test)"
    assert combine_text(" a\r\nb\tc ") == "ab c"


def test_duration_estimates_match_upstream_vectors():
    # upstream's prompt layout (omnivoice 0.2.1) as test vectors (portable: independent of the weights)
    assert estimate_target_tokens("Nice to meet you.", None, None) == 39
    assert estimate_target_tokens("Hello world.", None, None) == 36
    assert estimate_target_tokens("This is a test.", "Hello world.", 50) == 56
    assert estimate_target_tokens("Nice to meet you.", None, None, speed=2.0) == 19
    assert char_weight("中") == 3.0 and char_weight("1") == 3.5 and char_weight(" ") == 0.2
    assert char_weight("\u0301") == 0.0 and char_weight("ا") == 1.5 and char_weight("!") == 0.5


def test_unmask_schedule():
    assert unmask_schedule(8 * 39, 8, 0.1) == [5, 6, 8, 11, 17, 28, 57, 180]
    assert sum(unmask_schedule(8 * 123, 32, 0.1)) == 8 * 123
    t = time_steps(4, 1.0)
    assert t[0] == 0.0 and t[-1] == 1.0


def test_tiny_tokenizer_is_deterministic_and_has_the_specials():
    a, b = build_tokenizer(), build_tokenizer()
    assert a.to_str() == b.to_str()
    assert a.get_vocab_size() == 1100
    ids = a.encode("<|text_start|>Hello [laughter]<|text_end|>").ids
    assert ids[0] == a.token_to_id("<|text_start|>") and ids[-1] == a.token_to_id("<|text_end|>")
