"""OmniVoice's text side: language and voice-design resolution, text cleanup, the prompt
token layout and the rule-based duration estimator (upstream ``omnivoice`` 0.2.1
semantics: ``models/omnivoice.py``, ``utils/voice_design.py``, ``utils/text.py``,
``utils/duration.py``)."""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import torch
from tokenizers import Tokenizer

from audiocpp.engine.errors import UsageError, did_you_mean
from audiocpp.engine.text.punctuation import add_punctuation

from .languages import LANG_IDS, LANG_NAME_TO_ID

__all__ = ["PromptLayout", "add_punctuation", "build_prompt_layout", "combine_text", "estimate_target_tokens",
           "resolve_instruct", "resolve_language"]

# -- languages ---------------------------------------------------------------------------


def resolve_language(language: str | None) -> str | None:
    """A language name or id -> upstream's id; None / "none" / "auto" -> None (the model infers it)."""
    if language is None:
        return None
    value = language.strip()
    if not value or value.lower() in ("none", "auto"):
        return None
    if value in LANG_IDS:
        return value
    key = value.lower()
    if key in LANG_NAME_TO_ID:
        return LANG_NAME_TO_ID[key]
    hint = did_you_mean(key, [*LANG_NAME_TO_ID, *LANG_IDS], n=3, cutoff=0.75)
    raise UsageError(
        f"unknown language {language!r}",
        hint=hint + "use an id (en, zh, ja, de...) or a name (English, Chinese...) "
        "from `audiocpp families --json`, or leave --language unset to let the model infer it",
    )


# -- voice design (instruct) ----------------------------------------------------------------

ZH_RE = re.compile(r"[\u4e00-\u9fff]")
#: Mutually exclusive categories: English item -> Chinese item.
_PAIRED_CATEGORIES: tuple[dict[str, str], ...] = (
    {"male": "男", "female": "女"},
    {"child": "儿童", "teenager": "少年", "young adult": "青年", "middle-aged": "中年", "elderly": "老年"},
    {"very low pitch": "极低音调", "low pitch": "低音调", "moderate pitch": "中音调", "high pitch": "高音调",
     "very high pitch": "极高音调"},
    {"whisper": "耳语"},
)
ACCENTS = frozenset({
    "american accent", "british accent", "australian accent", "chinese accent", "canadian accent",
    "indian accent", "korean accent", "portuguese accent", "russian accent", "japanese accent",
})
DIALECTS = frozenset({
    "河南话", "陕西话", "四川话", "贵州话", "云南话", "桂林话", "济南话", "石家庄话",
    "甘肃话", "宁夏话", "青岛话", "东北话",
})
EN_TO_ZH = {en: zh for cat in _PAIRED_CATEGORIES for en, zh in cat.items()}
ZH_TO_EN = {zh: en for en, zh in EN_TO_ZH.items()}
EXCLUSIVE: tuple[frozenset[str], ...] = (
    *(frozenset(cat) | frozenset(cat.values()) for cat in _PAIRED_CATEGORIES), ACCENTS, DIALECTS)
VALID_ITEMS = frozenset(EN_TO_ZH) | frozenset(ZH_TO_EN) | ACCENTS | DIALECTS
VALID_EN = frozenset(i for i in VALID_ITEMS if not ZH_RE.search(i))
VALID_ZH = frozenset(i for i in VALID_ITEMS if ZH_RE.search(i))


def resolve_instruct(instruct: str | None, use_zh: bool = False) -> str | None:
    """Validate and normalise a voice-design description (upstream ``_resolve_instruct``).

    Items are comma separated (half- or full-width), case-insensitive; a dialect forces
    Chinese, an accent English, otherwise ``use_zh`` (the text contains Chinese) decides.
    Unknown items and two items of one category raise UsageError.
    """
    if instruct is None or not instruct.strip():
        return None
    text = instruct.strip()
    items = [x for x in re.split(r"\s*[,，]\s*", text) if x]
    normalised, unknown = [], []
    for raw in items:
        item = raw.strip().lower()
        if item in VALID_ITEMS:
            normalised.append(item)
        else:
            close = difflib.get_close_matches(item, VALID_ITEMS, n=1, cutoff=0.6)
            unknown.append(f"{raw!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if unknown:
        raise UsageError(
            f"unsupported voice-design item{'s' if len(unknown) > 1 else ''} in --instruct {text!r}: "
            + ", ".join(unknown),
            hint="valid English items: " + ", ".join(sorted(VALID_EN)) + "; valid Chinese items: "
            + "，".join(sorted(VALID_ZH)) + ". Separate English items with ', ' and Chinese ones with '，'",
        )
    has_dialect = any(n.endswith("话") for n in normalised)
    has_accent = any(" accent" in n for n in normalised)
    if has_dialect and has_accent:
        raise UsageError("--instruct mixes a Chinese dialect and an English accent",
                         hint="dialects are for Chinese speech, accents for English speech: keep one")
    if has_dialect:
        use_zh = True
    elif has_accent:
        use_zh = False
    table = EN_TO_ZH if use_zh else ZH_TO_EN
    normalised = [table.get(n, n) for n in normalised]
    conflicts = [hits for cat in EXCLUSIVE if len(hits := [n for n in normalised if n in cat]) > 1]
    if conflicts:
        raise UsageError(
            "conflicting --instruct items: " + "; ".join(" vs ".join(repr(x) for x in g) for g in conflicts),
            hint="each category (gender, age, pitch, style, accent, dialect) allows at most one item",
        )
    has_zh = any(any("\u4e00" <= c <= "\u9fff" for c in n) for n in normalised)
    return ("，" if has_zh else ", ").join(normalised)


# -- text -------------------------------------------------------------------------------------

NONVERBAL_RE = re.compile(
    r"\[(laughter|sigh|confirmation-en|question-en|question-ah|question-oh|question-ei|question-yi|"
    r"surprise-ah|surprise-oh|surprise-wa|surprise-yo|dissatisfaction-hnn)\]"
)
_CJK = r"[\u4e00-\u9fff]"
_SPACES_AROUND_CJK = re.compile(rf"(?<={_CJK})\s+|\s+(?={_CJK})")


def combine_text(text: str, ref_text: str | None = None) -> str:
    """Reference transcript + text, cleaned as upstream's ``_combine_text``."""
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return _SPACES_AROUND_CJK.sub("", full)


# -- duration ---------------------------------------------------------------------------------

_WEIGHTS = {
    "cjk": 3.0, "hangul": 2.5, "kana": 2.2, "ethiopic": 3.0, "yi": 3.0, "indic": 1.8, "thai_lao": 1.5,
    "khmer_myanmar": 1.8, "arabic": 1.5, "hebrew": 1.5, "latin": 1.0, "cyrillic": 1.0, "greek": 1.0,
    "armenian": 1.0, "georgian": 1.0, "punctuation": 0.5, "space": 0.2, "digit": 3.5, "mark": 0.0,
    "default": 1.0,
}
#: (last code point, script) blocks, searched with bisect (upstream ``RuleDurationEstimator``).
_RANGES: tuple[tuple[int, str], ...] = (
    (0x02AF, "latin"), (0x03FF, "greek"), (0x052F, "cyrillic"), (0x058F, "armenian"), (0x05FF, "hebrew"),
    (0x077F, "arabic"), (0x089F, "arabic"), (0x08FF, "arabic"), (0x097F, "indic"), (0x09FF, "indic"),
    (0x0A7F, "indic"), (0x0AFF, "indic"), (0x0B7F, "indic"), (0x0BFF, "indic"), (0x0C7F, "indic"),
    (0x0CFF, "indic"), (0x0D7F, "indic"), (0x0DFF, "indic"), (0x0EFF, "thai_lao"), (0x0FFF, "indic"),
    (0x109F, "khmer_myanmar"), (0x10FF, "georgian"), (0x11FF, "hangul"), (0x137F, "ethiopic"),
    (0x139F, "ethiopic"), (0x13FF, "default"), (0x167F, "default"), (0x169F, "default"), (0x16FF, "default"),
    (0x171F, "default"), (0x173F, "default"), (0x175F, "default"), (0x177F, "default"),
    (0x17FF, "khmer_myanmar"), (0x18AF, "default"), (0x18FF, "default"), (0x194F, "indic"),
    (0x19DF, "indic"), (0x19FF, "khmer_myanmar"), (0x1A1F, "indic"), (0x1AAF, "indic"), (0x1B7F, "indic"),
    (0x1BBF, "indic"), (0x1BFF, "indic"), (0x1C4F, "indic"), (0x1C7F, "indic"), (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"), (0x1CCF, "indic"), (0x1CFF, "indic"), (0x1D7F, "latin"), (0x1DBF, "latin"),
    (0x1DFF, "default"), (0x1EFF, "latin"), (0x309F, "kana"), (0x30FF, "kana"), (0x312F, "cjk"),
    (0x318F, "hangul"), (0x9FFF, "cjk"), (0xA4CF, "yi"), (0xA4FF, "default"), (0xA63F, "default"),
    (0xA69F, "cyrillic"), (0xA6FF, "default"), (0xA7FF, "latin"), (0xA82F, "indic"), (0xA87F, "default"),
    (0xA8DF, "indic"), (0xA8FF, "indic"), (0xA92F, "indic"), (0xA95F, "indic"), (0xA97F, "hangul"),
    (0xA9DF, "indic"), (0xA9FF, "khmer_myanmar"), (0xAA5F, "indic"), (0xAA7F, "khmer_myanmar"),
    (0xAADF, "indic"), (0xAAFF, "indic"), (0xAB2F, "ethiopic"), (0xAB6F, "latin"), (0xABBF, "default"),
    (0xABFF, "indic"), (0xD7AF, "hangul"), (0xFAFF, "cjk"), (0xFDFF, "arabic"), (0xFE6F, "default"),
    (0xFEFF, "arabic"), (0xFFEF, "latin"),
)
_BREAKPOINTS = tuple(end for end, _ in _RANGES)


@lru_cache(maxsize=4096)
def char_weight(char: str) -> float:
    """Relative speaking time of one character (1.0 = a Latin letter)."""
    code = ord(char)
    if 65 <= code <= 90 or 97 <= code <= 122:
        return _WEIGHTS["latin"]
    if code == 32:
        return _WEIGHTS["space"]
    if code == 0x0640:  # Arabic tatweel
        return _WEIGHTS["mark"]
    category = unicodedata.category(char)
    if category.startswith("M"):
        return _WEIGHTS["mark"]
    if category.startswith(("P", "S")):
        return _WEIGHTS["punctuation"]
    if category.startswith("Z"):
        return _WEIGHTS["space"]
    if category.startswith("N"):
        return _WEIGHTS["digit"]
    idx = bisect.bisect_left(_BREAKPOINTS, code)
    if idx < len(_RANGES):
        return _WEIGHTS.get(_RANGES[idx][1], _WEIGHTS["default"])
    if code > 0x20000:
        return _WEIGHTS["cjk"]
    return _WEIGHTS["default"]


def text_weight(text: str) -> float:
    return sum(char_weight(c) for c in text)


def estimate_duration(text: str, ref_text: str, ref_duration: float, low_threshold: float | None = 50,
                      boost_strength: float = 3) -> float:
    """Frames for ``text`` at the speaking rate of ``ref_text`` spoken in ``ref_duration``
    frames; short estimates are boosted along ``low * (est / low) ** (1 / boost)``."""
    if ref_duration <= 0 or not ref_text:
        return 0.0
    ref_weight = text_weight(ref_text)
    if ref_weight == 0:
        return 0.0
    estimate = text_weight(text) / (ref_weight / ref_duration)
    if low_threshold is not None and estimate < low_threshold:
        return low_threshold * (estimate / low_threshold) ** (1.0 / boost_strength)
    return estimate


def estimate_target_tokens(text: str, ref_text: str | None, num_ref_frames: int | None,
                           speed: float = 1.0) -> int:
    """Upstream's ``_estimate_target_tokens``: without a reference, "Nice to meet you." = 25 frames."""
    if num_ref_frames is None or not ref_text:
        ref_text, num_ref_frames = "Nice to meet you.", 25
    est = estimate_duration(text, ref_text, num_ref_frames)
    if speed > 0 and speed != 1.0:
        est = est / speed
    return max(1, int(est))


# -- prompt tokens ----------------------------------------------------------------------------


def tokenize_with_nonverbal_tags(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` with each non-verbal tag (``[laughter]``...) tokenized on its own,
    so its ids do not depend on the surrounding script (upstream ``_tokenize_with_nonverbal_tags``)."""
    ids: list[int] = []
    last = 0
    for m in NONVERBAL_RE.finditer(text):
        if m.start() > last:
            ids += tokenizer.encode(text[last:m.start()], add_special_tokens=False).ids
        ids += tokenizer.encode(m.group(), add_special_tokens=False).ids
        last = m.end()
    if last < len(text):
        ids += tokenizer.encode(text[last:], add_special_tokens=False).ids
    return ids or tokenizer.encode(text).ids


@dataclass(frozen=True)
class PromptLayout:
    """One conditional row: ``ids`` (C, S) with the text replicated over the codebooks, the
    reference codes and ``num_target`` mask tokens; audio starts at ``audio_start``."""

    ids: torch.Tensor
    audio_start: int
    num_target: int


def build_prompt_layout(tokenizer: Tokenizer, text: str, num_target: int, *, num_codebooks: int,
                        mask_id: int, ref_text: str | None = None, ref_codes: torch.Tensor | None = None,
                        language: str | None = None, instruct: str | None = None,
                        denoise: bool = True) -> PromptLayout:
    """``[<|denoise|>]<|lang_start|>lang<|lang_end|><|instruct_start|>instruct<|instruct_end|>``
    ``<|text_start|>ref_text text<|text_end|>`` + reference codes + masks (upstream
    ``_prepare_inference_inputs``)."""
    style = "<|denoise|>" if denoise and ref_codes is not None else ""
    style += f"<|lang_start|>{language or 'None'}<|lang_end|>"
    style += f"<|instruct_start|>{instruct or 'None'}<|instruct_end|>"
    style_ids = tokenizer.encode(style).ids
    text_ids = tokenize_with_nonverbal_tags(tokenizer,
                                            f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")
    head = torch.tensor(style_ids + text_ids, dtype=torch.long).unsqueeze(0).expand(num_codebooks, -1)
    parts = [head]
    if ref_codes is not None:
        parts.append(ref_codes.to(torch.long))
    parts.append(torch.full((num_codebooks, num_target), mask_id, dtype=torch.long))
    return PromptLayout(torch.cat(parts, dim=1), head.shape[1], num_target)
