"""engine.nn.layers.dac: causal convs keep causality, and streaming equals the offline forward."""

from __future__ import annotations

import torch
from torch import nn

from audiocpp.engine.nn.layers.dac import (
    CausalConv1d,
    CausalConvTranspose1d,
    ResidualUnit,
    centred_conv1d,
    extra_padding,
    stream_sequential,
)


def _randomize(module: nn.Module) -> None:
    torch.manual_seed(0)
    for p in module.parameters():
        p.data.normal_(0, 0.3)


def test_extra_padding_completes_the_last_stride() -> None:
    assert extra_padding(10, 4, 2, 2) == 0
    assert extra_padding(11, 4, 2, 2) == 1
    conv = CausalConv1d(1, 1, 4, stride=2)
    assert conv(torch.randn(1, 1, 11)).shape[-1] == 6


def test_causal_outputs_do_not_depend_on_the_future() -> None:
    seq = nn.Sequential(CausalConv1d(3, 4, 7, dilation=3), ResidualUnit(4, 9),
                        CausalConvTranspose1d(4, 2, 8, 4))
    _randomize(seq)
    x = torch.randn(1, 3, 40)
    with torch.no_grad():
        a = seq(x)
        b = seq(torch.cat((x[..., :25], torch.randn(1, 3, 15)), -1))
    assert a.shape[-1] == 160
    assert torch.equal(a[..., :100], b[..., :100])


def test_streaming_equals_offline() -> None:
    seq = nn.Sequential(CausalConv1d(3, 4, 7, dilation=1), ResidualUnit(4, 3),
                        CausalConvTranspose1d(4, 4, 4, 2), ResidualUnit(4, 9), CausalConv1d(4, 1, 7))
    _randomize(seq)
    x = torch.randn(1, 3, 37)
    with torch.no_grad():
        offline = seq(x)
        state: dict = {}
        pieces = [stream_sequential(seq, x[..., a:b], state) for a, b in ((0, 1), (1, 9), (9, 10), (10, 37))]
    streamed = torch.cat(pieces, -1)
    assert streamed.shape == offline.shape
    assert torch.allclose(streamed, offline, atol=1e-6)


def test_transposed_conv_with_kernel_equal_to_stride_streams_as_one_gemm() -> None:
    conv = CausalConvTranspose1d(6, 5, 2, stride=2)
    _randomize(conv)
    x = torch.randn(2, 6, 11)
    with torch.no_grad():
        offline = conv(x)
        state: dict = {}
        pieces = [conv.stream(x[..., a:b], state) for a, b in ((0, 1), (1, 5), (5, 11))]
        alone = torch.cat([conv.stream(x[1:2, :, a:b], {}) for a, b in ((0, 1), (1, 5), (5, 11))], -1)
    streamed = torch.cat(pieces, -1)
    assert streamed.shape == offline.shape == (2, 5, 22)
    assert not state  # frames do not overlap: nothing is carried
    assert torch.allclose(streamed, offline, atol=1e-6)
    assert torch.equal(alone[0], streamed[1])  # each item its own GEMM


def test_fused_snake_is_bit_identical_to_the_reference_snake() -> None:
    from audiocpp.engine.nn.layers import activations
    from audiocpp.engine.nn.layers.dac import snake

    torch.manual_seed(0)
    x, alpha = torch.randn(2, 5, 3001) * 3, torch.rand(1, 5, 1) + 0.1
    assert torch.equal(snake(x, alpha), activations.snake(x, alpha))
    assert torch.equal(snake(x[..., :7].reshape(2, 5, 7, 1), alpha),
                       activations.snake(x[..., :7].reshape(2, 5, 7, 1), alpha))


def test_centred_residual_unit_keeps_length() -> None:
    unit = ResidualUnit(4, 3, causal=False)
    assert unit(torch.randn(1, 4, 20)).shape[-1] == 20
    assert centred_conv1d(4, 4, 7, dilation=3)(torch.randn(1, 4, 20)).shape[-1] == 20


def _decoder_like() -> nn.Sequential:
    from audiocpp.engine.nn.layers.dac import Snake1d

    seq = nn.Sequential(CausalConv1d(6, 8, 7), Snake1d(8), CausalConvTranspose1d(8, 4, 8, 4),
                        ResidualUnit(4, 3), CausalConvTranspose1d(4, 4, 3, 2), ResidualUnit(4, 9),
                        Snake1d(4), CausalConv1d(4, 1, 7), nn.Tanh())
    _randomize(seq)
    return seq


def test_channels_last_matches_the_direct_convolutions(monkeypatch) -> None:
    from audiocpp.engine.nn.layers import dac

    monkeypatch.setattr(dac, "ROW_BLOCK", 16)  # several row blocks, partial taps at a block's start
    seq = _decoder_like()
    x = torch.randn(3, 6, 23)
    with torch.no_grad():
        offline = seq(x)
        weights = [p.clone() for p in seq.parameters()]
        last = dac.forward_channels_last(seq, x.transpose(1, 2).contiguous()).transpose(1, 2)
        # the weights were relaid in place: same values
        assert all(torch.equal(a, b) for a, b in zip(weights, seq.parameters(), strict=True))
        again = seq(x)  # the direct path still works on the relaid weights
        alone = dac.forward_channels_last(seq, x[1:2].transpose(1, 2).contiguous())
    assert last.shape == offline.shape == (3, 1, 23 * 8)
    assert torch.allclose(last, offline, atol=1e-5)
    assert torch.equal(again, offline)
    assert torch.equal(alone[0], last[1].transpose(0, 1))  # an item's GEMMs do not depend on its batch


def test_channels_last_streaming_equals_offline(monkeypatch) -> None:
    from audiocpp.engine.nn.layers import dac

    monkeypatch.setattr(dac, "ROW_BLOCK", 16)
    seq = _decoder_like()
    x = torch.randn(2, 23, 6)
    with torch.no_grad():
        offline = dac.forward_channels_last(seq, x)
        state: dict = {}
        bounds = ((0, 1), (1, 9), (9, 10), (10, 23))
        pieces = [dac.stream_channels_last(seq, x[:, a:b], state) for a, b in bounds]
    streamed = torch.cat(pieces, 1)
    assert streamed.shape == offline.shape
    assert torch.allclose(streamed, offline, atol=1e-6)


def test_channels_last_refuses_what_it_cannot_run() -> None:
    import pytest

    from audiocpp.engine.nn.layers import dac

    with pytest.raises(ValueError, match="stride-1"):
        CausalConv1d(2, 2, 4, stride=2).forward_cl(torch.randn(1, 8, 2))
    with pytest.raises(TypeError, match="not pointwise"):
        dac.forward_channels_last([nn.GELU()], torch.randn(1, 4, 2))


def test_unfolded_bf16_conv_rounds_each_output_once(monkeypatch) -> None:
    """16-bit taps: one GEMM per block over the gathered shifted inputs, so each output is the
    float32 sum of the bf16-rounded products, rounded once to bf16 (several blocks, partial taps)."""
    from audiocpp.engine.nn.layers import dac

    monkeypatch.setattr(dac, "UNFOLDED_BYTES", 64 * 7 * 5 * 2)  # 64-row blocks
    torch.manual_seed(0)
    x, taps, bias = torch.randn(300, 5), torch.randn(7, 5, 3), torch.randn(3)
    for dilation, left in ((1, 6), (3, 18), (2, 0)):
        got = dac.causal_conv_rows(x, taps.bfloat16(), bias, dilation, left)
        # the same in float64 from the rounded operands
        want = dac.causal_conv_rows(x.bfloat16().double(), taps.bfloat16().double(),
                                    bias.bfloat16().double(), dilation, left)
        assert got.dtype == torch.bfloat16 and got.shape == want.shape
        error = (got.double() - want).abs()
        assert error.le(want.abs() * 2 ** -8).all()  # within half a bf16 step of the exact sum
        # and rounded to the nearest bf16 value except next to a rounding boundary
        assert (got != want.bfloat16()).float().mean() <= 0.01


def test_bf16_weights_run_channels_last_beside_float32_activations() -> None:
    """A decoder-like stack whose convs hold bf16 weights and whose Snakes round their outputs
    to bf16 (``Decoder.copy_in``'s layout: the last Snake and conv stay float32) gives float32
    audio close to the float32 stack's, offline and streamed."""
    from audiocpp.engine.nn.layers import dac

    seq = _decoder_like()
    x = torch.randn(1, 40, 6)
    with torch.no_grad():
        exact = dac.forward_channels_last(seq, x)
        for module in seq[:-3].modules():
            if isinstance(module, (CausalConv1d, CausalConvTranspose1d)):
                module.conv.weight.data = module.conv.weight.data.bfloat16()
            elif isinstance(module, dac.Snake1d):
                module.out_dtype = torch.bfloat16
        low = dac.forward_channels_last(seq, x)
        state: dict = {}
        pieces = [dac.stream_channels_last(seq, x[:, a:b], state) for a, b in ((0, 7), (7, 40))]
        streamed = torch.cat(pieces, 1)
    assert low.dtype == streamed.dtype == torch.float32 and low.shape == streamed.shape == exact.shape
    cosine = torch.nn.functional.cosine_similarity
    assert cosine(low.flatten(), exact.flatten(), 0) >= 0.999  # 0.99990 measured (weights N(0, 0.3))
    assert cosine(streamed.flatten(), low.flatten(), 0) >= 0.999
