"""Audio8 TTS in a batch, both backbones: every request gives what it gives alone.

Every generate case of the goldens (greedy and sampled with their own temperature / top-k / top-p,
cloning from one and from two references, long text in chunks, rows that end on EOS and rows that run
to their cap) as rows of one batch against the same case alone: identical codes per chunk and audio
cosine >= 0.9999 (figures print with ``-s``), for the 0.6B (Qwen) and the 0.1B (Falcon-H1) slow AR.
Each row keeps its own slow-AR state (KV cache; Mamba2 conv and SSM states), RAS window and
generator; a frame is one batched call. Upstream's left-padded greedy batch gives the same codes
as our batch of its texts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from audiocpp.families.audio8_tts import plugin
from tests.batching import compare_rows, join_while_running
from tests.support import one_torch_thread

from .cases import generate_cases, request_for
from .conftest import GOLDENS

_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)
BACKBONES = {"qwen": GOLDENS, "falcon_h1": GOLDENS / "falcon"}


def codes(result):
    return [np.asarray(c) for c in result.details["codes"]]


@pytest.fixture(scope="module", params=list(BACKBONES))
def setup(request):
    root = BACKBONES[request.param]
    model = plugin.load(root / "tiny")
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    rows = []
    for case in generate_cases(manifest):
        task, req = request_for(case, manifest["defaults"], GOLDENS / "audio")
        rows.append((model.session(task), req))
    alone = [session.run(req) for session, req in rows]
    return model, manifest, rows, alone


def test_every_case_in_one_batch_gives_its_lone_result(setup) -> None:
    model, _, rows, alone = setup
    finished = [any(r.details["finished"]) for r in alone]
    assert any(finished) and not all(finished)  # some rows end on EOS, others at their cap
    compare_rows(model, rows, codes, alone=alone)


def test_rows_joining_a_running_batch(setup) -> None:
    model, _, rows, alone = setup
    join_while_running(model, rows[:5], codes, alone=alone[:5], gap_s=0.03)


def test_streaming_rows_in_a_batch_stream_their_lone_pieces(setup) -> None:
    model, _, rows, alone = setup
    streaming = [(model.session(s.task, "streaming"), r) for s, r in rows[:3]]
    lone = [[e.audio.samples for e in s.stream(r) if not e.is_final] for s, r in streaming]
    events = list(model.stream_batch(streaming + rows[3:5]))
    for key, pieces in enumerate(lone):
        mine = [e.event.audio.samples for e in events if e.key == key and not e.event.is_final]
        assert len(mine) == len(pieces) and all(np.array_equal(a, b) for a, b in zip(mine, pieces))
    finals = {e.key: e.event.result for e in events if e.event is not None and e.event.is_final}
    for key in (3, 4):
        assert all(np.array_equal(a, b) for a, b in zip(codes(finals[key]), codes(alone[key])))


def test_upstream_padded_greedy_batch_gives_our_batch(setup) -> None:
    model, manifest, _, _ = setup
    case = next((c for c in manifest["cases"] if c["name"] == "batch_greedy"), None)
    if case is None:
        pytest.skip("no greedy batch golden for this backbone")
    root = BACKBONES["qwen"] if model.config.slow_backbone == "qwen" else BACKBONES["falcon_h1"]
    ref = dict(np.load(root / "goldens" / "batch_greedy.npz"))
    rows = []
    for text in case["texts"]:
        _, req = request_for({**case, "text": text, "kind": "generate"}, manifest["defaults"],
                             GOLDENS / "audio")
        rows.append((model.session("tts"), req))
    results = model.run_batch(rows)
    for i, result in enumerate(results):
        n = int(ref["code_lengths"][i])
        assert np.array_equal(result.details["codes"][0], ref["codes"][i, :, :n]), f"row {i}"
