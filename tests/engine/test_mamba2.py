"""engine.nn.layers.mamba2 on its own: the chunked SSD scan against a plain sequential recurrence,
chunk-size invariance, prefill + recurrent steps against one prefill, the in-proj multipliers,
and float32 SSM parameters under a bfloat16 cast. (Parity with transformers' FalconH1Mixer is
in tests/audio8_tts/test_falcon_h1.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from audiocpp.engine.nn.layers.mamba2 import Mamba2Cache, Mamba2Mixer, segment_sum, ssd_chunked


def sequential_scan(x, dt, A, B, C, D):
    """h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T ;  y_t = h_t C_t + D x_t  (float64)."""
    b, t, h, p = x.shape
    n = B.shape[-1]
    x, dt, A, B, C, D = (v.double() for v in (x, dt, A, B, C, D))
    state = torch.zeros(b, h, p, n, dtype=torch.float64)
    ys = []
    for i in range(t):
        decay = torch.exp(dt[:, i] * A)[..., None, None]
        state = state * decay + (dt[:, i, :, None, None] * x[:, i, :, :, None] * B[:, i, :, None, :])
        ys.append(torch.einsum("bhpn,bhn->bhp", state, C[:, i]) + D[:, None] * x[:, i])
    return torch.stack(ys, dim=1), state


def random_scan_inputs(t: int, seed: int = 0, b: int = 2, h: int = 3, p: int = 4, n: int = 5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, h, p, generator=g)
    dt = F.softplus(torch.randn(b, t, h, generator=g) - 1)
    A = -torch.rand(h, generator=g) * 2 - 0.1
    B = torch.randn(b, t, h, n, generator=g)
    C = torch.randn(b, t, h, n, generator=g)
    D = torch.randn(h, generator=g)
    return x, dt, A, B, C, D


def test_segment_sum() -> None:
    a = torch.tensor([1.0, 2.0, 3.0])
    s = segment_sum(a)
    assert torch.equal(s.diagonal(), torch.zeros(3))
    assert s[2, 0] == 5.0 and s[2, 1] == 3.0 and s[1, 0] == 2.0
    assert torch.isinf(s[0, 1]) and s[0, 1] < 0


@pytest.mark.parametrize("t,chunk", [(1, 4), (7, 4), (8, 4), (19, 8), (19, 64)])
def test_ssd_equals_sequential_recurrence(t: int, chunk: int) -> None:
    x, dt, A, B, C, D = random_scan_inputs(t, seed=t)
    y, state = ssd_chunked(x, dt, A, B, C, D, chunk)
    y_ref, state_ref = sequential_scan(x, dt, A, B, C, D)
    assert y.shape == x.shape and state.shape == state_ref.shape
    assert (y.double() - y_ref).abs().max() < 1e-4
    assert (state.double() - state_ref).abs().max() < 1e-4


def _mixer(**kwargs) -> Mamba2Mixer:
    torch.manual_seed(3)
    m = Mamba2Mixer(24, 32, 4, 8, 6, n_groups=2, d_conv=4, chunk_size=kwargs.pop("chunk_size", 8), **kwargs)
    with torch.no_grad():
        m.A_log.uniform_(0, 2)
        m.dt_bias.uniform_(-3, -1)
        m.D.normal_(1, 0.1)
    return m.eval()


def test_chunk_size_does_not_change_the_result() -> None:
    x = torch.randn(1, 21, 24)
    with torch.inference_mode():
        ys = [_mixer(chunk_size=c)(x) for c in (4, 8, 32)]
    assert (ys[0] - ys[1]).abs().max() < 1e-5 and (ys[0] - ys[2]).abs().max() < 1e-5


@pytest.mark.parametrize("prefill", [1, 3, 8, 13])
def test_prefill_then_steps_equals_one_prefill(prefill: int) -> None:
    m = _mixer()
    x = torch.randn(2, 20, 24)
    cache = Mamba2Cache(1, 2, m.conv_dim, m.d_conv, m.n_heads, m.head_dim, m.d_state)
    with torch.inference_mode():
        full = m(x)
        parts = [m(x[:, :prefill], cache, 0)]
        parts += [m.step(x[:, i : i + 1], cache, 0) for i in range(prefill, x.shape[1])]
        whole_cache = Mamba2Cache(1, 2, m.conv_dim, m.d_conv, m.n_heads, m.head_dim, m.d_state)
        m(x, whole_cache, 0)
    assert (torch.cat(parts, dim=1) - full).abs().max() < 1e-5
    # The conv state holds the last d_conv raw inputs (in_proj rows: GEMM rounding only);
    # the SSM state the same recurrence.
    assert (cache.conv - whole_cache.conv).abs().max() < 1e-6
    assert (cache.ssm - whole_cache.ssm).abs().max() < 1e-5


def test_in_proj_multipliers_scale_the_five_sections() -> None:
    mult = [0.5, 2.0, 0.25, 4.0, 0.75]
    scaled, plain = _mixer(zxbcdt_multipliers=mult), _mixer()
    sizes = [32, 32, 12, 12, 4]
    factors = torch.cat([torch.full((s,), m) for s, m in zip(sizes, mult)])
    with torch.no_grad():
        plain.in_proj.weight.mul_(factors[:, None])
    x = torch.randn(1, 9, 24)
    with torch.inference_mode():
        assert (scaled(x) - plain(x)).abs().max() < 1e-5
    assert "mup" not in scaled.state_dict()
    with pytest.raises(ValueError):
        Mamba2Mixer(24, 32, 4, 8, 6, zxbcdt_multipliers=[1.0, 2.0])


def test_reduced_precision_keeps_ssm_parameters_in_float32() -> None:
    m = _mixer()
    x = torch.randn(1, 11, 24)
    with torch.inference_mode():
        ref = m(x)
    m = m.to(torch.bfloat16)
    m.keep_fp32()
    for p in (m.A_log, m.D, m.dt_bias, m.conv1d.weight, m.conv1d.bias):
        assert p.dtype == torch.float32
    assert m.in_proj.weight.dtype == torch.bfloat16
    cache = Mamba2Cache(1, 1, m.conv_dim, m.d_conv, m.n_heads, m.head_dim, m.d_state)
    with torch.inference_mode():
        y = m(x[:, :6].bfloat16(), cache, 0)
        steps = [m.step(x[:, i : i + 1].bfloat16(), cache, 0) for i in range(6, 11)]
    out = torch.cat([y, *steps], dim=1)
    assert out.dtype == torch.bfloat16 and cache.ssm.dtype == torch.float32
    rel = (out.float() - ref).abs().max() / ref.abs().max()
    assert 0 < rel < 0.05


def test_bad_shapes_are_rejected() -> None:
    with pytest.raises(ValueError):
        Mamba2Mixer(24, 30, 4, 8, 6)
    with pytest.raises(ValueError):
        Mamba2Mixer(24, 32, 4, 8, 6, n_groups=3)
