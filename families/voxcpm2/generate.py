"""The autoregressive loop (upstream ``_inference``), bad-case retries, decoding and streaming.

Per generated patch: the DiT samples the patch from the two LM states (``UnifiedCFM``: one
noise draw from the request's generator, then the Euler solver with batched CFG), LocEnc embeds
it, the stop head reads the base-LM state that produced it, and unless generation stops, the
base LM and the residual LM take one step each on static KV caches.

Numbers follow upstream exactly in float32; the speed comes from caches sized per request
(attention reads only the filled prefix), Python-int positions (no tensors built per step) and
one host read per patch (the stop flag).

The loop is a row program (``engine.batching``): each patch is one :class:`PatchOp` (the base-LM
and residual-LM step over the previous patch on the row's own KV caches, then the DiT condition,
the CFM solve from the row's own noise, LocEnc and the stop logits). In a batch, the ops of every row
run as one call with a row each (attention per row over its own cache); alone, a group of one
computes what the loop always computed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from audiocpp.engine.batching import Op, relay
from audiocpp.engine.nn.layers.kv_cache import StaticKVCache

from .codec import AudioVAE, StreamingDecoder
from .model import VoxCPMModel


@dataclass
class PrefillSequence:
    """The prefill sequence (upstream's ``text_token, text_mask, audio_feat, audio_mask``)."""

    tokens: torch.Tensor  # (T,) int64; 0 at audio positions
    text_mask: torch.Tensor  # (T,) 0/1
    audio_mask: torch.Tensor  # (T,) 0/1
    feats: torch.Tensor  # (T, P, D) float32; zeros at text positions
    target_length: int  # tokens of the target text alone (length cap and bad-case ratio)
    mode: str = "zero_shot"

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@dataclass
class DecodeOptions:
    min_len: int = 2
    max_len: int = 4096
    inference_timesteps: int = 10
    cfg_value: float = 2.0
    retry_badcase: bool = True
    retry_badcase_max_times: int = 3
    retry_badcase_ratio_threshold: float = 6.0

    def length_cap(self, target_length: int) -> int:
        """Upstream's ``min(int(len * ratio + 10), max_len)``, applied even without retries."""
        return min(int(target_length * self.retry_badcase_ratio_threshold + 10), self.max_len)


@dataclass
class Run:
    """One pass of the AR loop."""

    context: torch.Tensor  # (c, P, D) prompt patches kept as decoding context
    patches: list[torch.Tensor] = field(default_factory=list)  # each (P, D), model dtype
    stopped: bool = False  # the stop head ended it (else the length cap did)

    @property
    def generated(self) -> torch.Tensor:
        return torch.stack(self.patches) if self.patches else self.context[:0]


@dataclass
class RowState:
    """One request's AR state between its ops: the two LM states, the previous patch, its caches,
    and the previous patch's embedding still to feed through the LMs (None after the prompt)."""

    lm_hidden: torch.Tensor  # (1, H)
    res_hidden: torch.Tensor  # (1, H)
    cond: torch.Tensor  # (1, P, D): the previous patch (zeros after text)
    base_cache: StaticKVCache
    res_cache: StaticKVCache
    embedding: torch.Tensor | None = None  # (1, 1, H)


class PatchOp(Op):
    """A row's next patch: first the LM steps over its previous patch (when it has one), then the
    DiT condition, the CFM solve from ``noise`` (drawn by the row from its own generator), LocEnc of
    the patch, and the stop logits of the state that produced it. Result: ``(patch (1, P, D),
    embedding (1, 1, H), stop: bool)``."""

    def __init__(self, generator: VoxCPMGenerator, state: RowState, noise: torch.Tensor, timesteps: int,
                 cfg_value: float) -> None:
        self.generator, self.state, self.noise = generator, state, noise
        self.timesteps, self.cfg_value = timesteps, cfg_value

    def group_key(self) -> Hashable:
        return id(self.generator)

    @classmethod
    def run_group(cls, ops: Sequence[PatchOp]) -> list[Any]:
        m = ops[0].generator.model
        with torch.inference_mode():
            _step_lms(m, [op.state for op in ops if op.state.embedding is not None])
            out: list[Any] = [None] * len(ops)
            by_steps: dict[int, list[int]] = {}
            for i, op in enumerate(ops):  # one time grid per CFM solve
                by_steps.setdefault(op.timesteps, []).append(i)
            for steps, members in by_steps.items():
                for i, result in zip(members, _sample_patches(ops[0].generator, [ops[i] for i in members],
                                                              steps)):
                    out[i] = result
        return out


def _step_lms(m: VoxCPMModel, states: list[RowState]) -> None:
    """One base-LM and one residual-LM step of each row over its pending patch embedding."""
    if not states:
        return
    curr = _rows([s.embedding for s in states])  # (B, 1, H)
    lm_hidden = m.fsq_layer(m.base_lm.step(curr, [s.base_cache for s in states])[:, 0, :])
    res_in = m.residual_input(lm_hidden, curr[:, 0, :])
    res_hidden = m.residual_lm.step(res_in.unsqueeze(1), [s.res_cache for s in states])[:, 0, :]
    for b, s in enumerate(states):
        s.lm_hidden, s.res_hidden, s.embedding = lm_hidden[b:b + 1], res_hidden[b:b + 1], None


def _sample_patches(gen: VoxCPMGenerator, ops: list[PatchOp], timesteps: int) -> list[Any]:
    m, cfg = gen.model, gen.config
    states = [op.state for op in ops]
    lm_hidden = _rows([s.lm_hidden for s in states])
    mu = m.dit_condition(lm_hidden, _rows([s.res_hidden for s in states]))
    cond = _rows([s.cond for s in states]).transpose(1, 2).contiguous()
    values = [op.cfg_value for op in ops]
    cfg_value: float | torch.Tensor = values[0]
    if any(v != values[0] for v in values):  # per row, (B, 1, 1) against the patches
        cfg_value = torch.tensor(values, dtype=mu.dtype, device=mu.device).view(-1, 1, 1)
    patch = m.feat_decoder(mu, timesteps, cfg.patch_size, cond, noise=_rows([op.noise for op in ops]),
                           cfg_value=cfg_value).transpose(1, 2)  # (B, P, D)
    embedding = m.encode_patches(patch.unsqueeze(1))  # (B, 1, H)
    stop = m.stop_logits(lm_hidden).argmax(dim=-1).tolist()  # one host read for the group
    return [(patch[b:b + 1], embedding[b:b + 1], stop[b] == 1) for b in range(len(ops))]


def _rows(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Rows stacked along dim 0 (one row: itself, so a request alone computes on its own tensor)."""
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


class VoxCPMGenerator:
    """Runs the AR loop of one loaded model; rows of a batch take KV caches from its pool (used by
    one thread at a time: the model's guard)."""

    def __init__(self, model: VoxCPMModel, vae: AudioVAE) -> None:
        self.model = model
        self.vae = vae
        self.config = model.config
        self._free: dict[str, list[StaticKVCache]] = {"base": [], "residual": []}

    # -- caches -------------------------------------------------------------------------
    def _take_cache(self, name: str, lm, length: int) -> StaticKVCache:
        """A free cache of at least ``length`` positions (the smallest that fits), or a new one."""
        dtype = self.model.dtype
        free = self._free[name]
        fits = [c for c in free if c.max_length >= length and c.buffer.dtype == dtype]
        if fits:
            cache = min(fits, key=lambda c: c.max_length)
            free.remove(cache)
        else:
            cache = lm.new_cache(length, dtype=dtype, device=self.model.device)
        cache.reset()
        return cache

    def _give_back(self, name: str, cache: StaticKVCache) -> None:
        free = self._free[name]
        free.append(cache)
        if len(free) > 4:  # keep the largest few
            free.remove(min(free, key=lambda c: c.max_length))

    def context_patches(self, prompt: PrefillSequence) -> torch.Tensor:
        """Trailing prompt patches used as decoding context (upstream ``context_len``)."""
        prefix = self.config.variant.streaming_prefix_len
        audio_idx = torch.nonzero(prompt.audio_mask, as_tuple=True)[0]
        if self.config.variant.prompt_trim == "context":
            # v2: only when the sequence ends with prompt audio (continuation modes).
            if len(prompt) == 0 or int(prompt.audio_mask[-1]) != 1:
                return prompt.feats[:0]
            n = min(prefix - 1, len(audio_idx))
            return prompt.feats[audio_idx[len(audio_idx) - n :]] if n > 0 else prompt.feats[:0]
        # v1: the last prefix-1 positions whenever the prompt holds audio.
        n = min(prefix - 1, len(audio_idx))
        return prompt.feats[len(prompt) - n :] if n > 0 else prompt.feats[:0]

    # -- the AR loop ----------------------------------------------------------------------
    def run(self, prompt: PrefillSequence, opts: DecodeOptions, generator: torch.Generator | None,
            max_len: int | None = None) -> Generator[Any, Any, Run]:
        """The row program of one pass: yields its ops and each new patch ``(P, D)`` as it is
        sampled; returns the :class:`Run`."""
        m, cfg = self.model, self.config
        max_len = opts.length_cap(prompt.target_length) if max_len is None else max_len
        if len(prompt) >= cfg.max_length:
            raise_too_long(len(prompt), cfg.max_length)
        # Upstream's caches hold max_length positions; ours only what this request can use.
        total = min(len(prompt) + max_len, cfg.max_length)
        base_cache = self._take_cache("base", m.base_lm, total)
        res_cache = self._take_cache("residual", m.residual_lm, total)
        try:
            state = self._prefill(prompt, base_cache, res_cache)
            run = Run(context=self.context_patches(prompt).to(m.device))
            for i in range(max_len):
                noise = m.feat_decoder.draw_noise(1, cfg.patch_size, dtype=m.dtype, device=m.device,
                                                  generator=generator)
                patch, embedding, stop = yield PatchOp(self, state, noise, opts.inference_timesteps,
                                                       opts.cfg_value)
                run.patches.append(patch[0])
                state.cond = patch
                yield patch[0]
                # The stop head reads the state that produced this patch.
                if i > opts.min_len and stop:
                    run.stopped = True
                    break
                if i == max_len - 1:
                    break  # upstream would step the LMs once more and discard the result
                if base_cache.length >= base_cache.max_length:
                    raise_too_long(len(prompt), cfg.max_length, generated=i + 1)
                state.embedding = embedding  # the next op steps the LMs over it first
            return run
        finally:
            self._give_back("base", base_cache)
            self._give_back("residual", res_cache)

    @torch.inference_mode()
    def _prefill(self, prompt: PrefillSequence, base_cache: StaticKVCache,
                 res_cache: StaticKVCache) -> RowState:
        """The prompt through both LMs (alone: a prefill is long enough to fill the machine)."""
        m, cfg = self.model, self.config
        dtype = m.dtype
        tokens = prompt.tokens.to(m.device).unsqueeze(0)
        text_mask = prompt.text_mask.to(m.device, dtype).unsqueeze(0).unsqueeze(-1)
        audio_mask = prompt.audio_mask.to(m.device, dtype).unsqueeze(0).unsqueeze(-1)
        feats = prompt.feats.to(m.device, dtype).unsqueeze(0)

        feat_embed = m.encode_patches(feats)
        text_embed = m.base_lm.embed_tokens(tokens).to(dtype) * cfg.lm.embedding_scale
        combined = text_mask * text_embed + audio_mask * feat_embed

        enc = m.base_lm(combined, causal=True, cache=base_cache)
        enc = m.fsq_layer(enc) * audio_mask + enc * text_mask
        res = m.residual_lm(m.residual_input(enc, audio_mask * feat_embed), causal=True, cache=res_cache)
        return RowState(lm_hidden=enc[:, -1, :], res_hidden=res[:, -1, :], cond=feats[:, -1, :, :],
                        base_cache=base_cache, res_cache=res_cache)

    # -- offline ----------------------------------------------------------------------------
    def generate(self, prompt: PrefillSequence, opts: DecodeOptions,
                 generator: torch.Generator | None) -> Generator[Op, Any, tuple[torch.Tensor, Run, int]]:
        """Offline (a row program): retries bad cases, decodes, trims the context. Returns
        ``(audio (n,), run, attempts)``."""
        attempts = 0
        limit = max(1, opts.retry_badcase_max_times) if opts.retry_badcase else 1
        while True:
            attempts += 1
            run = yield from relay(self.run(prompt, opts, generator))
            if not opts.retry_badcase or attempts >= limit:
                break
            counted = len(run.patches) + (len(run.context) if self.config.variant.prompt_trim == "fixed"
                                          else 0)
            if counted < prompt.target_length * opts.retry_badcase_ratio_threshold:
                break
        return self.decode(prompt, run), run, attempts

    @torch.inference_mode()
    def decode(self, prompt: PrefillSequence, run: Run) -> torch.Tensor:
        cfg = self.config
        seq = torch.cat([run.context.to(run.generated.dtype), run.generated], dim=0)  # (n, P, D)
        latents = seq.to(torch.float32).reshape(-1, cfg.audio_vae.latent_dim).T.unsqueeze(0)
        audio = self.vae.decode(latents)[0, 0]
        if cfg.variant.prompt_trim == "context":
            trim = len(run.context) * cfg.patch_size * cfg.audio_vae.decode_chunk_size
        else:
            has_audio = bool(prompt.audio_mask.any())
            trim = ((cfg.variant.streaming_prefix_len - 1) * cfg.patch_size * cfg.audio_vae.chunk_size
                    if has_audio else 0)
        return audio[trim:]

    # -- streaming ------------------------------------------------------------------------
    def stream(self, prompt: PrefillSequence, opts: DecodeOptions,
               generator: torch.Generator | None) -> Generator[Any, Any, Run]:
        """A row program that yields its ops and audio ``(n,)`` per generated patch; returns the
        :class:`Run`."""
        cfg = self.config
        context = self.context_patches(prompt).to(self.model.device)
        with torch.inference_mode():
            if cfg.variant.streaming == "stateful":
                decoder = self.vae.streaming_decoder()
                if len(context):
                    # warm the causal state; output is trimmed offline too
                    decoder.decode_chunk(_latents(context))
                step = _stateful(decoder)
            else:
                step = _window(self.vae, list(context), cfg.variant.streaming_prefix_len,
                               cfg.patch_size * cfg.audio_vae.chunk_size)

        def decode_patch(patch: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                return step(patch)

        return (yield from relay(self.run(prompt, opts, generator), decode_patch))


def _latents(patches: torch.Tensor) -> torch.Tensor:
    """``(n, P, D)`` -> ``(1, D, n*P)`` float32 (upstream ``rearrange(b t p d -> b d (t p))``)."""
    return patches.to(torch.float32).reshape(-1, patches.shape[-1]).T.unsqueeze(0)


def _stateful(decoder: StreamingDecoder) -> Callable[[torch.Tensor], torch.Tensor]:
    def step(patch: torch.Tensor) -> torch.Tensor:
        return decoder.decode_chunk(_latents(patch.unsqueeze(0)))[0, 0]

    return step


def _window(vae: AudioVAE, history: list[torch.Tensor], size: int,
            patch_samples: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """v1 streaming: decode the last ``size`` patches statelessly, keep the newest patch's samples."""

    def step(patch: torch.Tensor) -> torch.Tensor:
        history.append(patch)
        del history[:-size]
        return vae.decode(_latents(torch.stack(history)))[0, 0, -patch_samples:]

    return step


def raise_too_long(prompt_len: int, capacity: int, generated: int = 0) -> None:
    """The sequence outgrew the model's ``max_length`` (upstream: "KV cache is full")."""
    from audiocpp.engine.errors import UsageError

    what = f"the prompt ({prompt_len} positions)" + (f" plus {generated} generated patches"
                                                     if generated else "")
    raise UsageError(
        f"{what} reached the model's max_length of {capacity} positions",
        hint="shorten the text (use text_chunk_size for long text), the prompt or reference audio, "
        "or lower max_tokens",
    )

