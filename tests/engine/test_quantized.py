"""Quantized weights kept quantized: Q8_0 / Q4_0 blocks read as stored from real GGUF files
(plain and package), the int8 / int4 linear layers against the dequantized matrices, loading a
module with them (engine.nn.build.load_on_meta), and pages of the memory map released once
copied; 16-bit packages loaded in their own dtype stay views of the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import load_on_meta
from audiocpp.engine.nn.linear import quantized as qnn
from audiocpp.engine.weights import Rename, Transpose, adapt, open_weights
from audiocpp.engine.weights.blocks import BlockTensor
from audiocpp.engine.weights.gguf_file import mapped_file, release_pages
from tests.engine.weights_builders import write_gguf, write_package

RNG = np.random.default_rng(13)
TENSORS = {
    "a.weight": (RNG.standard_normal((64, 128)) * 0.05).astype(np.float32),
    "a.bias": RNG.standard_normal(64).astype(np.float32),
    "b.weight": (RNG.standard_normal((48, 64)) * 0.1).astype(np.float32),
    "norm": np.ones(48, dtype=np.float32),
}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(128, 64)
        self.b = nn.Linear(64, 48, bias=False)
        self.norm = nn.Parameter(torch.ones(48))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x))) * self.norm


@pytest.fixture(scope="module", params=["Q8_0", "Q4_0"])
def quantized_gguf(request, tmp_path_factory) -> tuple[str, Path]:
    qtype = request.param
    path = tmp_path_factory.mktemp("q") / f"net-{qtype}.gguf"
    return qtype, write_gguf(path, TENSORS, types={"a.weight": qtype, "b.weight": qtype})


def test_blocks_are_the_stored_bytes_and_dequantize_as_gguf_does(quantized_gguf) -> None:
    qtype, path = quantized_gguf
    source = open_weights(path)
    blocks = source.blocks("a.weight")
    assert isinstance(blocks, BlockTensor) and blocks.qtype == qtype and blocks.shape == (64, 128)
    assert mapped_file(torch.from_numpy(blocks.data)) is not None  # a view of the file, not a copy
    assert torch.equal(blocks.dequantize(), source.get("a.weight"))
    assert blocks.values().shape == (64, 128) and blocks.scales().shape == (64, 4)
    assert source.blocks("a.bias") is None and source.blocks("norm") is None  # F32: no blocks


def test_package_namespaces_and_renames_serve_blocks_transforms_do_not(tmp_path: Path) -> None:
    path = write_package(tmp_path / "p.gguf", {f"weights/{k}": v for k, v in TENSORS.items()},
                         types={"weights/a.weight": "Q8_0"})
    view = open_weights(path).namespace("weights")
    assert view.blocks("a.weight").shape == (64, 128)
    renamed = adapt(view, [Rename({"a.weight": "x.weight"})])
    assert renamed.blocks("x.weight") is not None
    assert adapt(view, [Transpose("a.weight")]).blocks("a.weight") is None


def test_rows_are_requantized_with_the_largest_block_scale() -> None:
    blocks = _q8_blocks(np.random.default_rng(1).standard_normal((16, 256)).astype(np.float32))
    q, s = qnn.requantize_rows(blocks)
    w = blocks.dequantize()
    assert q.dtype == torch.int8 and s.shape == (16,)
    assert torch.allclose(s, w.abs().amax(1) / 127)
    err = (q.float() * s[:, None] - w).abs()
    assert float((err / s[:, None]).max()) <= 0.5 + 1e-5  # at most half a step of the row scale
    # the block holding the row's largest value keeps its int8 values exactly
    row_block = w.view(16, 8, 32).abs().amax(2).argmax(1)
    for r in range(16):
        b = int(row_block[r])
        assert torch.equal(q[r, b * 32:(b + 1) * 32], torch.from_numpy(blocks.q8()[r, b * 32:(b + 1) * 32]))


def test_a_zero_row_stays_zero() -> None:
    w = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    w[2] = 0
    q, s = qnn.requantize_rows(_q8_blocks(w))
    assert float(s[2]) == 0 and not q[2].any()


@pytest.mark.parametrize("rows", [1, 3, qnn.INT8PACK_MAX_ROWS, qnn.INT8PACK_MAX_ROWS + 1, 200])
def test_int8_linear_matches_its_dequantized_matrix_on_both_paths(rows: int) -> None:
    blocks = _q8_blocks(np.random.default_rng(3).standard_normal((96, 256)).astype(np.float32) * 0.05)
    q, s = qnn.requantize_rows(blocks)
    bias = torch.randn(96)
    layer = qnn.Int8Linear(q, s.to(torch.bfloat16), bias)
    x = torch.randn(2, rows, 256)
    reference = x @ layer.dequantized(torch.float32).t() + bias
    got = layer(x.to(torch.bfloat16))
    assert got.shape == (2, rows, 96) and got.dtype == torch.bfloat16
    rel = float((got.float() - reference).norm() / reference.norm())
    assert rel < 1e-2, rel  # bfloat16 rows and outputs
    exact = layer(x)  # float32 rows: the converted matrix, float32 GEMM
    assert torch.allclose(exact, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not qnn.int4pack_available(), reason="this torch has no CPU int4 kernel")
def test_int4_linear_computes_with_q4_0_exactly(tmp_path: Path) -> None:
    source = open_weights(write_gguf(tmp_path / "q4.gguf", TENSORS, types={"a.weight": "Q4_0"}))
    blocks = source.blocks("a.weight")
    layer = qnn.Int4Linear.from_blocks(blocks)  # where the VNNI kernel is missing
    # 4 bits + scales, < 1 byte each
    assert sum(b.numel() * b.element_size() for b in layer.buffers()) < 64 * 128
    x = torch.randn(5, 128).to(torch.bfloat16)
    reference = x.float() @ source.get("a.weight").t()
    assert float((layer(x).float() - reference).norm() / reference.norm()) < 1e-2


def test_load_on_meta_keeps_linears_quantized_in_16_bit_compute(quantized_gguf) -> None:
    qtype, path = quantized_gguf
    source = open_weights(path)
    quant = load_on_meta(Net, source, dtype=torch.bfloat16, quantize=("*",))
    assert isinstance(quant.a, qnn.QUANTIZED_LAYERS) and isinstance(quant.b, qnn.QUANTIZED_LAYERS)
    assert quant.a.bias.dtype == torch.bfloat16 and quant.norm.dtype == torch.bfloat16
    assert qnn.quantized_bytes(quant) < (64 * 128 + 48 * 64) * 1.2  # about one byte per weight or less
    exact = load_on_meta(Net, source, dtype=torch.float32, quantize=("*",))  # float32: dequantized, exact
    assert type(exact.a) is nn.Linear and torch.equal(exact.a.weight, source.get("a.weight"))
    x = torch.randn(7, 128)
    ref = exact(x)
    with torch.no_grad():
        rel = float((quant(x.to(torch.bfloat16)).float() - ref).norm() / ref.norm())
    assert rel < 0.03, rel
    only_a = load_on_meta(Net, source, dtype=torch.bfloat16, quantize=("a",))
    assert type(only_a.a) is not nn.Linear and type(only_a.b) is nn.Linear


def test_quantized_loading_stays_strict(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "short.gguf", {k: v for k, v in TENSORS.items() if k != "norm"},
                      types={"a.weight": "Q8_0"})
    with pytest.raises(ModelError, match="missing from the weights: norm"):
        load_on_meta(Net, open_weights(path), dtype=torch.bfloat16, quantize=("*",))


def test_copied_tensors_release_their_pages_views_stay(tmp_path: Path) -> None:
    tensors = {"a.weight": np.ones((256, 1024), np.float32), "a.bias": np.zeros(256, np.float32)}
    source = open_weights(write_gguf(tmp_path / "f32.gguf", tensors))
    view = source.get("a.weight")
    assert mapped_file(view) is not None and release_pages(view)
    assert float(view.sum()) == 256 * 1024  # released pages read back from the file unchanged
    own = view.clone()
    assert mapped_file(own) is None and not release_pages(own)


def test_a_bf16_package_loaded_in_bf16_keeps_views_of_the_file(tmp_path: Path) -> None:
    path = write_package(tmp_path / "bf16.gguf", {f"weights/{k}": v for k, v in TENSORS.items()},
                         types={"weights/a.weight": "BF16", "weights/b.weight": "BF16"})
    source = open_weights(path).namespace("weights")
    net = load_on_meta(Net, source, dtype=torch.bfloat16)
    assert net.a.weight.dtype == torch.bfloat16 and mapped_file(net.a.weight) is not None
    assert mapped_file(net.norm) is None  # stored F32, cast: its own copy


def _q8_blocks(w: np.ndarray) -> BlockTensor:
    """Q8_0 bytes of ``w`` as ggml lays them out (gguf.quants)."""
    import gguf

    data = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    return BlockTensor("Q8_0", w.shape, np.ascontiguousarray(data).reshape(-1).view(np.uint8))
