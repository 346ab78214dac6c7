"""engine.nn.dac: causal convs keep causality, and streaming equals the offline forward."""

from __future__ import annotations

import torch
from torch import nn

from audiocpp.engine.nn.dac import (
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


def test_fused_snake_is_bit_identical_to_the_reference_snake() -> None:
    from audiocpp.engine.nn import activations
    from audiocpp.engine.nn.dac import snake

    torch.manual_seed(0)
    x, alpha = torch.randn(2, 5, 3001) * 3, torch.rand(1, 5, 1) + 0.1
    assert torch.equal(snake(x, alpha), activations.snake(x, alpha))
    assert torch.equal(snake(x[..., :7].reshape(2, 5, 7, 1), alpha),
                       activations.snake(x[..., :7].reshape(2, 5, 7, 1), alpha))


def test_centred_residual_unit_keeps_length() -> None:
    unit = ResidualUnit(4, 3, causal=False)
    assert unit(torch.randn(1, 4, 20)).shape[-1] == 20
    assert centred_conv1d(4, 4, 7, dilation=3)(torch.randn(1, 4, 20)).shape[-1] == 20
