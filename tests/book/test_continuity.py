"""One narrator: the drift of the voice from the narrator's, measured without a speaker model as the
distance between each sentence's log-mel spectral envelope and the narrator sentence's
(tests/book/continuity.py), on every family's tiny model, for

- the book: `audiocpp book` with the default narrator (the first chunk's voice saved and cloned by
  every other chunk, one seed for the book);
- free voices: the same sentences one request each with a seed of its own and no reference, as a
  sentence-at-a-time audiobook script makes them (`audiocpp batch`, the narrator's sentence with the
  book's seed, so that both measure against the same narrator clip).

A tiny model has random weights: what varies between its draws is what its seed and conditioning change
in its output. VoxCPM1's, VoxCPM2's and Audio8's spectra move from one free draw to the next, and the
book holds them nearer the narrator; OmniVoice's tiny spectrum hardly moves whatever the seed or the
voice (its envelope is the random network's, not a speaker's), so there the proxy has nothing to show
and the test checks that it stays flat. Run with ``-s`` for the figures (docs/book.md, "How steady the voice
is")."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.support import run_cli

from . import inputs
from .conftest import ENV, needs_ffmpeg, ok, run_book
from .continuity import clip, drifts, sentences

pytestmark = needs_ffmpeg

#: the narrator's sentence first (the book's first of 40-200 characters), then seven of similar length
SENTENCES = [
    "The narrator reads this opening line of the story.",
    "Rain fell on the roofs of the old harbour town.",
    "A small boat waited by the stone steps all night.",
    "Nobody knew who had tied it there, or when.",
    "In the morning the fishermen gathered to look at it.",
    "One of them said it belonged to the lighthouse keeper.",
    "Another laughed and said the keeper had no boat.",
    "By noon the tide had carried it out to sea again.",
]
NARRATOR = SENTENCES[0]
SEED = 7
#: chunks long enough for a spectrum (VoxCPM: 40 patches; the others' tests' own lengths)
OPTIONS = {
    "omnivoice": {"num_inference_steps": 4},
    "voxcpm2": {"min_tokens": 40, "max_tokens": 40, "retry_badcase": False},
    "voxcpm1": {"min_tokens": 40, "max_tokens": 40, "retry_badcase": False},
    "audio8_tts": {"max_new_tokens": 30},
}
#: whether the tiny model's free draws differ in spectrum (else the proxy is flat for it)
VARIES = {"omnivoice": False, "voxcpm2": True, "voxcpm1": True, "audio8_tts": True}


@pytest.mark.parametrize("family", ["omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"])
def test_the_narrator_keeps_the_voice_steadier_than_free_voices(family, tiny_models, tmp_path) -> None:
    flags = [x for key, value in OPTIONS[family].items() for x in ("-r", f"{key}={value}")]
    book = inputs.write_markdown(tmp_path / "book.md", [("Drift", [" ".join(SENTENCES)])])
    summary = ok(
        run_book(
            book,
            "--model",
            tiny_models[family],
            "--out-dir",
            tmp_path / "book",
            "--format",
            "wav",
            "--master",
            "none",
            "--no-captions",
            "--no-chapter-titles",
            "--seed",
            str(SEED),
            *flags,
        )
    )
    assert int(summary["chunks"]) == len(SENTENCES) and summary["voice"].startswith("the first chunk's")
    narrated = drifts(sentences(tmp_path / "book.work"), NARRATOR)
    # free voices: each sentence its own request and seed
    manifest = tmp_path / "free.jsonl"
    lines = [
        {"id": f"s{i}", "text": text, "seed": SEED if i == 0 else 100 + i, "options": OPTIONS[family]}
        for i, text in enumerate(SENTENCES)
    ]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    proc = run_cli("batch", manifest, "--out-dir", tmp_path / "free", "--model", tiny_models[family], env=ENV)
    assert proc.returncode == 0, proc.stderr
    free = drifts({text: clip(tmp_path / "free" / f"s{i}.wav") for i, text in enumerate(SENTENCES)}, NARRATOR)
    assert len(narrated) == len(free) == len(SENTENCES) - 1
    book_median, free_median = statistics.median(narrated), statistics.median(free)
    print(
        f"\n{family}: drift from the narrator (dB, log-mel envelope): the book median {book_median:.2f} "
        f"max {max(narrated):.2f}; free voices median {free_median:.2f} max {max(free):.2f}"
    )
    if VARIES[family]:
        assert free_median > 0.5 and book_median < free_median and max(narrated) < max(free)
    else:  # the tiny model's envelope does not move: nothing drifts, either way
        assert max(narrated) < 1.0 and max(free) < 1.0
