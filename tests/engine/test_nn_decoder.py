"""engine.nn.layers.decoder: prefill + static steps equal a plain full-sequence forward; both RoPE
conventions, fused and separate QKV, qk-norm, GQA, left padding, both attention kernels."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from audiocpp.engine.nn.layers.decoder import FISH_NAMES, HF_NAMES, DecoderConfig, DecoderLayer, DecoderStack
from audiocpp.engine.nn.layers.rope import (
    apply_interleaved_rope,
    apply_rotary,
    interleaved_rope_table,
    rope_inv_freq,
)

CONFIGS = {
    "fish_interleaved_bf16": DecoderConfig(dim=32, n_head=4, n_kv_head=2, head_dim=8, intermediate_size=48,
                                           qkv_bias=True, rope_style="interleaved", rope_base=1e6,
                                           rope_table_dtype=torch.bfloat16, names=FISH_NAMES),
    "fish_eager": DecoderConfig(dim=32, n_head=4, n_kv_head=1, head_dim=8, intermediate_size=48,
                                rope_style="interleaved", rope_table_dtype=torch.bfloat16, attention="eager",
                                names=FISH_NAMES),
    "hf_rotate_half_qknorm": DecoderConfig(dim=32, n_head=4, n_kv_head=2, head_dim=8, intermediate_size=40,
                                           qk_norm=True, o_bias=True, rope_base=1e4, names=HF_NAMES),
}


def _reference(layers: nn.ModuleList, cfg: DecoderConfig, x: torch.Tensor,
               key_mask: torch.Tensor) -> torch.Tensor:
    """The plain full-sequence forward: causal & padding mask, positions cumsum(mask) - 1."""
    b, t, _ = x.shape
    positions = key_mask.long().cumsum(-1).sub(1).clamp_min(0)
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    mask = causal[None, None] & key_mask[:, None, None, :].bool()
    if cfg.rope_style == "interleaved":
        table = interleaved_rope_table(64, cfg.head_dim, cfg.rope_base, cfg.rope_table_dtype)[positions]
        rot = lambda z: apply_interleaved_rope(z, table)  # noqa: E731
    else:
        freqs = positions[..., None].float() * rope_inv_freq(cfg.head_dim, cfg.rope_base)
        emb = torch.cat((freqs, freqs), -1)
        rot = lambda z: apply_rotary(z, emb.cos()[:, :, None], emb.sin()[:, :, None])  # noqa: E731
    for layer in layers:
        q, k, v = layer.attn.project(layer.attention_input(x))
        q, k, v = rot(q).transpose(1, 2), rot(k).transpose(1, 2), v.transpose(1, 2)
        k = k.repeat_interleave(cfg.n_rep, dim=1)
        v = v.repeat_interleave(cfg.n_rep, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(cfg.head_dim)
        p = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
        out = (p @ v).transpose(1, 2).reshape(b, t, -1)
        x = layer.mlp_block(x + layer.attn.output(out))
    return x


@pytest.mark.parametrize("name", list(CONFIGS))
def test_prefill_and_steps_equal_full_forward(name: str) -> None:
    torch.manual_seed(0)
    cfg = CONFIGS[name]
    layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(2))
    for p in layers.parameters():
        p.data.normal_(0, 0.3)
    stack = DecoderStack(layers, cfg, max_positions=64)
    b, t, extra = 2, 7, 5
    x = torch.randn(b, t + extra, cfg.dim)
    key_mask = torch.ones(b, t + extra, dtype=torch.long)
    if cfg.attention == "sdpa":  # eager attention turns fully masked rows into NaN, as fish-speech's does
        key_mask[1, :3] = 0  # row 1 left-padded by 3
    key_mask[0, t + 2] = 0  # a finished row appends masked columns
    expected = _reference(layers, cfg, x, key_mask)
    positions = key_mask.cumsum(-1).sub(1).clamp_min(0)
    stack.setup(b, t + extra + 3)
    with torch.no_grad():
        out = stack.prefill(x[:, :t], positions[:, :t], key_mask[:, :t])
        rows = [out]
        for i in range(t, t + extra):
            rows.append(stack.step(x[:, i:i + 1], positions[:, i:i + 1], key_mask[:, i:i + 1]))
    got = torch.cat(rows, dim=1)
    valid = key_mask.bool()
    assert torch.allclose(got[valid], expected[valid], atol=2e-5, rtol=1e-5)
    assert stack.length == t + extra


def test_step_shapes_are_static_and_overflow_is_an_error() -> None:
    cfg = CONFIGS["fish_interleaved_bf16"]
    layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(1))
    stack = DecoderStack(layers, cfg, max_positions=16)
    stack.setup(1, 4)
    buffers = (stack.keys.data_ptr(), stack.mask_add.data_ptr())
    with torch.no_grad():
        stack.prefill(torch.randn(1, 3, 32), torch.arange(3)[None], torch.ones(1, 3, dtype=torch.long))
        stack.step(torch.randn(1, 1, 32), torch.tensor([[3]]), torch.ones(1, 1, dtype=torch.long))
        assert (stack.keys.data_ptr(), stack.mask_add.data_ptr()) == buffers
        with pytest.raises(RuntimeError, match="overflow"):
            stack.step(torch.randn(1, 1, 32), torch.tensor([[4]]), torch.ones(1, 1, dtype=torch.long))


def test_grouped_step_matches_sdpa_math_backend() -> None:
    """The static step's arithmetic is SDPA's math backend (up to summation order)."""
    torch.manual_seed(1)
    cfg = CONFIGS["fish_interleaved_bf16"]
    layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(1))
    stack = DecoderStack(layers, cfg, max_positions=16)
    stack.setup(1, 9)
    q = torch.randn(1, 4, 1, 8)
    k, v = torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8)
    stack.mask_add.fill_(float("-inf"))
    stack.mask_add[..., :6] = 0
    got = stack._attend_grouped(q, k * stack.key_scale, v)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q, k[:, :, :6].repeat_interleave(2, 1),
                                             v[:, :, :6].repeat_interleave(2, 1))
    assert torch.allclose(got, ref, atol=1e-6)


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("table_dtype", [torch.float32, torch.bfloat16])
def test_interleaved_rope_is_the_pairwise_formula_bit_for_bit(x_dtype, table_dtype) -> None:
    """The whole-tensor form gives the bits of ``(x0 c - x1 s, x1 c + x0 s)`` computed pair by pair
    in float32 (fish-speech's arithmetic), for a shared table and a per-row one."""
    gen = torch.Generator().manual_seed(3)
    table = interleaved_rope_table(512, 16, 1e4, table_dtype)
    for scale in (1e-3, 1.0, 1e3):
        x = (torch.randn(2, 5, 3, 16, generator=gen) * scale).to(x_dtype)
        for rope in (table[:5], table[torch.randint(0, 512, (2, 5), generator=gen)]):
            pairs = x.float().reshape(2, 5, 3, 8, 2)
            t = rope[None, :, None] if rope.ndim == 3 else rope[:, :, None]
            c, s = t[..., 0].float(), t[..., 1].float()
            x0, x1 = pairs[..., 0], pairs[..., 1]
            expected = torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1).flatten(3).to(x_dtype)
            assert torch.equal(apply_interleaved_rope(x, rope), expected)
