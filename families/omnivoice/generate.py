"""MaskGIT decoding as upstream's ``OmniVoice._generate_iterative`` does it, for one item.

Each step runs the backbone on two rows: the conditional prompt and the unconditional row
(only the masked target, at position 0, padded with the mask id to the same length; its
padding attends only to itself). Classifier-free guidance combines the two rows'
log-softmaxes; tokens are chosen by argmax (or Gumbel top-k sampling with a class
temperature) and positions by confidence minus a per-codebook penalty (plus Gumbel noise
with a position temperature). Every random draw comes from the request's generator in
upstream's order and shapes, so a seeded run reproduces upstream's tokens.

Cost cutters that keep the float32 results unchanged: the rows are packed (the padding of
the unconditional row is never computed; see ``model.py``), and without guidance the
unconditional row is not computed at all; the mask, packing and rotary tables are built
once per chunk; only the two target windows go through the audio heads; steps that unmask
nothing skip the forward pass (upstream runs it and discards it).

The loop is a row program (``engine.batching``): each forward pass is a :class:`ForwardOp`. In a
batch of requests, the packed rows of every request waiting on its next step (each at its own
step of its own schedule, with its own target length) go through the backbone as one packed
sequence (``Packing.merge``), and every request's predictions and draws stay its own.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from audiocpp.engine.batching import Op
from audiocpp.engine.nn.layers.sampling import gumbel_noise_like, keep_top_k
from audiocpp.engine.nn.linear.row_invariance import all_same_rows, torch_gemm_shapes
from audiocpp.engine.progress import NullProgress, Progress

from .model import OmniVoiceLM, Packing, Rope, rope_tables
from .prompt_layout import PromptLayout


@dataclass(frozen=True)
class MaskGitParams:
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0


def time_steps(num_step: int, t_shift: float) -> list[float]:
    """``t = linspace(0, 1, N + 1)`` shifted to ``s t / (1 + (s - 1) t)``, in float32 as upstream."""
    t = torch.linspace(0.0, 1.0, num_step + 1)
    return (t_shift * t / (1 + (t_shift - 1) * t)).tolist()


def unmask_schedule(total: int, num_step: int, t_shift: float) -> list[int]:
    """Tokens to unmask at each step: ``ceil(total * dt)`` capped by what remains; the last step
    takes the rest."""
    t = time_steps(num_step, t_shift)
    remaining, out = total, []
    for step in range(num_step):
        n = remaining if step == num_step - 1 else min(math.ceil(total * (t[step + 1] - t[step])), remaining)
        out.append(int(n))
        remaining -= int(n)
    return out


def gumbel_sample(logits: torch.Tensor, temperature: float,
                  generator: torch.Generator | None) -> torch.Tensor:
    """``logits / temperature + Gumbel`` (upstream ``_gumbel_sample``)."""
    scaled = logits / temperature
    return scaled + gumbel_noise_like(scaled, generator)


def filter_top_k(logits: torch.Tensor, ratio: float = 0.1) -> torch.Tensor:
    """Keep the ``ceil(ratio * V)`` largest entries (by index, as ``topk`` returns them), -inf elsewhere."""
    return keep_top_k(logits, math.ceil(ratio * logits.shape[-1]))


@dataclass
class Batch:
    """The constant inputs of one chunk's steps (conditional row 0, unconditional row 1)."""

    input_ids: torch.Tensor  # (2, C, S)
    audio_mask: torch.Tensor  # (2, S)
    attention_mask: torch.Tensor  # (2, 1, S, S) bool
    cond_len: int
    target_len: int


def build_batch(prompt: PromptLayout, mask_id: int) -> Batch:
    """Upstream's batch for one item (B = 1): the uncond row holds the last T columns at 0..T-1,
    padded with ``mask_id``; padding attends only to itself (a True diagonal)."""
    ids = prompt.ids
    c, s = ids.shape
    t = prompt.num_target
    input_ids = torch.full((2, c, s), mask_id, dtype=torch.long)
    audio_mask = torch.zeros((2, s), dtype=torch.bool)
    attention = torch.zeros((2, 1, s, s), dtype=torch.bool)
    input_ids[0] = ids
    audio_mask[0, prompt.audio_start:] = True
    attention[0, :, :s, :s] = True
    input_ids[1, :, :t] = ids[:, -t:]
    audio_mask[1, :t] = True
    attention[1, :, :t, :t] = True
    if s > t:
        pad = torch.arange(t, s)
        attention[1, :, pad, pad] = True
    return Batch(input_ids, audio_mask, attention, s, t)


@dataclass
class PackedBatch:
    """What the backbone sees at every step of a chunk: packed ids (1, C, N), audio mask
    (1, N), the packing, rotary tables (N, D); ids of the target windows change per step."""

    input_ids: torch.Tensor
    audio_mask: torch.Tensor
    packing: Packing
    rope: Rope
    cond_len: int
    target_len: int
    guided: bool
    #: the backbone runs upstream's padded rows (S, S), not the packed (S, T): where torch's GEMM
    #: would not give the packed rows upstream's bits (``engine.nn.linear.row_invariance``)
    padded: bool = False
    #: the heads run over every position of upstream's (2, S) rows, not the two windows alone (idem)
    heads_full: bool = False

    @property
    def windows(self) -> int:
        """Target windows through the heads: the conditional one, and the unconditional one."""
        return 2 if self.guided else 1


class MaskGitDecoder:
    """Runs the MaskGIT loop of one chunk on an :class:`OmniVoiceLM`.

    ``compute_dtype`` float32 is upstream's arithmetic; bfloat16 runs the backbone in bf16
    (weights cast once, ``OmniVoiceLoadedModel.lm_for``) and keeps the sampling maths in float32.
    """

    def __init__(self, lm: OmniVoiceLM, compute_dtype: torch.dtype = torch.float32) -> None:
        self.lm = lm
        self.cfg = lm.cfg
        self.compute_dtype = compute_dtype
        # the LM may sit on a GPU: the loop's bookkeeping and sampling stay on the CPU, the ids go
        # to the device per step and the two target windows' logits come back
        self.device = lm.llm.norm.weight.device
        # torch's own GEMMs in the backbone and the heads (none where the linears are quantized):
        # packing rows changes where each row sits in their products (engine.nn.linear.row_invariance)
        self.backbone_gemms = torch_gemm_shapes(lm.llm)
        self.head_gemms = torch_gemm_shapes(lm.audio_heads)

    def step_logits(self, packed: PackedBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Float32 logits (1, C, T, V) of the conditional and unconditional target windows
        (the latter None without guidance: upstream computes that row and ignores it)."""
        device = self.device
        hidden = self.lm.hidden(packed.input_ids.to(device), packed.audio_mask.to(device), packed.packing,
                                packed.rope, self.compute_dtype)
        s, t = packed.cond_len, packed.target_len
        if packed.heads_full:  # upstream's (2, S) rows, the windows taken after the heads
            full = hidden if packed.padded else torch.cat([hidden, hidden.new_zeros(2 * s - len(hidden),
                                                                                     hidden.shape[1])])
            logits = self.lm.heads(full).cpu()  # (C, 2S, V)
            c_logits, u_logits = logits[:, s - t:s].unsqueeze(0), logits[:, s:s + t].unsqueeze(0)
            return c_logits, (u_logits if packed.guided else None)
        windows = [hidden[s - t:s]]
        if packed.guided:
            windows.append(hidden[s:s + t])
        logits = self.lm.heads(torch.stack(windows)).cpu()
        return logits[0:1], (logits[1:2] if packed.guided else None)

    def predict(self, c_logits: torch.Tensor, u_logits: torch.Tensor | None, params: MaskGitParams,
                generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream ``_predict_tokens_with_scoring``: tokens and confidence scores (1, C, T)."""
        if params.guidance_scale != 0:
            assert u_logits is not None
            c_lp = F.log_softmax(c_logits, dim=-1)
            u_lp = F.log_softmax(u_logits, dim=-1)
            log_probs = torch.log_softmax(c_lp + params.guidance_scale * (c_lp - u_lp), dim=-1)
        else:
            log_probs = F.log_softmax(c_logits, dim=-1)
        log_probs[..., self.cfg.audio_mask_id] = -float("inf")
        if params.class_temperature > 0.0:
            filtered = filter_top_k(log_probs, ratio=0.1)
            tokens = gumbel_sample(filtered, params.class_temperature, generator).argmax(dim=-1)
        else:
            tokens = log_probs.argmax(dim=-1)
        return tokens, log_probs.max(dim=-1)[0]

    def pack(self, batch: Batch, guided: bool) -> PackedBatch:
        """The batch's valid positions packed (cond row, then the uncond row's T positions). In
        float32 (upstream's arithmetic), where torch's GEMM would give the packed rows other bits
        than upstream's padded (2, S) product, the backbone keeps upstream's rows (``padded``);
        likewise the heads (``heads_full``)."""
        s, t = batch.cond_len, batch.target_len
        rows = s + t if guided else s
        exact = self.compute_dtype == torch.float32
        padded = exact and not all_same_rows(self.backbone_gemms, 2 * s, [(rows, 0, 0, rows)])
        windows = [(2 * t, 0, s - t, t), (2 * t, t, s, t)] if guided else [(t, 0, s - t, t)]
        heads_full = exact and not all_same_rows(self.head_gemms, 2 * s, windows)
        lengths = (s, s) if padded else ((s, t) if guided else (s,))
        packing = Packing(lengths, s, batch.attention_mask[: len(lengths)], exact=exact)
        rope = rope_tables(packing.positions(), self.cfg.llm, self.compute_dtype)
        return PackedBatch(packing.pack(batch.input_ids, dim=1).unsqueeze(0).contiguous(),
                           packing.pack(batch.audio_mask).unsqueeze(0), packing,
                           (rope[0][0].to(self.device), rope[1][0].to(self.device)),
                           s, t, guided, padded, heads_full)

    def merges_exactly(self, batches: list[PackedBatch]) -> bool:
        """Whether one backbone pass over these requests' rows (and one heads pass over their
        windows) gives each request the bits of its own pass: torch's GEMMs checked for the row
        counts and offsets of this merge (none to check where the linears are quantized)."""
        if any(b.padded or b.heads_full for b in batches):
            return False
        rows = [b.input_ids.shape[2] for b in batches]
        windows = [b.windows * b.target_len for b in batches]
        starts = [sum(rows[:i]) for i in range(len(rows))]
        window_starts = [sum(windows[:i]) for i in range(len(windows))]
        return (all_same_rows(self.backbone_gemms, sum(rows), [(n, 0, a, n) for n, a in zip(rows, starts)])
                and all_same_rows(self.head_gemms, sum(windows),
                                  [(n, 0, a, n) for n, a in zip(windows, window_starts)]))

    def step_logits_batch(self, batches: list[PackedBatch]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """:meth:`step_logits` of several requests' packed rows in one backbone pass."""
        if len(batches) == 1 or not self.merges_exactly(batches):
            return [self.step_logits(b) for b in batches]
        device = self.device
        ids = torch.cat([b.input_ids for b in batches], dim=2)
        mask = torch.cat([b.audio_mask for b in batches], dim=1)
        packing = Packing.merge([b.packing for b in batches])
        rope = (torch.cat([b.rope[0] for b in batches]), torch.cat([b.rope[1] for b in batches]))
        hidden = self.lm.hidden(ids.to(device), mask.to(device), packing, rope, self.compute_dtype)
        windows, offset = [], 0
        for b in batches:
            s, t = b.cond_len, b.target_len
            windows.append(hidden[offset + s - t:offset + s])
            if b.guided:
                windows.append(hidden[offset + s:offset + s + t])
            offset += b.input_ids.shape[2]
        logits = self.lm.heads(torch.cat(windows)).cpu()  # (C, sum of T, V)
        out, start = [], 0
        for b in batches:
            t = b.target_len
            c_logits = logits[:, start:start + t].unsqueeze(0)
            start += t
            u_logits = None
            if b.guided:
                u_logits = logits[:, start:start + t].unsqueeze(0)
                start += t
            out.append((c_logits, u_logits))
        return out

    @torch.inference_mode()
    def generate(self, prompt: PromptLayout, params: MaskGitParams, generator: torch.Generator | None = None,
                 progress: Progress | None = None) -> Generator[ForwardOp, Any, torch.Tensor]:
        """The row program of one chunk: yields its forward passes (:class:`ForwardOp`), returns
        the (C, T) tokens."""
        progress = progress or NullProgress()
        cfg = self.cfg
        mask_id, num_cb, t = cfg.audio_mask_id, cfg.num_audio_codebook, prompt.num_target
        packed = self.pack(build_batch(prompt, mask_id), guided=params.guidance_scale != 0)
        tokens = torch.full((1, num_cb, t), mask_id, dtype=torch.long)
        layer_ids = torch.arange(num_cb).view(1, -1, 1)
        s = packed.cond_len
        for k in unmask_schedule(t * num_cb, params.num_step, params.t_shift):
            progress.advance()
            if k <= 0:
                continue
            c_logits, u_logits = yield ForwardOp(self, packed)
            pred, scores = self.predict(c_logits, u_logits, params, generator)
            scores = scores - (layer_ids * params.layer_penalty_factor)
            if params.position_temperature > 0.0:
                scores = gumbel_sample(scores, params.position_temperature, generator)
            scores.masked_fill_(tokens != mask_id, -float("inf"))
            _, top = torch.topk(scores.flatten(), k)
            flat = tokens.flatten()
            flat[top] = pred.flatten()[top]
            tokens = flat.view_as(tokens)
            packed.input_ids[:, :, s - t:s] = tokens
            if packed.guided:
                packed.input_ids[:, :, s:s + t] = tokens
        return tokens[0]


class ForwardOp(Op):
    """One MaskGIT forward pass of a request: its packed rows -> the float32 logits of its target
    window(s), ``(c_logits, u_logits)`` as :meth:`MaskGitDecoder.step_logits` returns them."""

    def __init__(self, decoder: MaskGitDecoder, packed: PackedBatch) -> None:
        self.decoder, self.packed = decoder, packed

    def group_key(self) -> Hashable:
        return (id(self.decoder.lm), self.decoder.compute_dtype)

    @classmethod
    def run_group(cls, ops: Sequence[ForwardOp]) -> list[Any]:
        with torch.inference_mode():
            return ops[0].decoder.step_logits_batch([op.packed for op in ops])
