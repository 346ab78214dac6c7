"""The DualAR decode loop and sampling, as upstream ``ArkttsModel.generate`` runs them.

Per step: score the next semantic token (semantic ids and EOS only), sample it (legacy
top-k/top-p, temperature, the exponential race) together with a second "high" draw at the RAS
temperature/top-p, keep the high one when the normal one repeats a token of the RAS window; run
the fast AR over the codebooks; feed ``[semantic, c0..c9]`` back. Random draws come from the
request generator in upstream's order and shapes: ``rand[B, V]`` (normal), ``rand[B, V]``
(high), then ``9 x rand[B, codebook_size]``, where ``V`` is the vocabulary of the slow AR's head.
Quirk kept: the RAS window starts as zeros after step 0, without step 0's token.

Full-vocabulary heads (0.6B) are scored on the semantic rows and EOS only; the filter runs on
those 4097 scores, and the softmaxes and uniforms are taken over the whole vocabulary as upstream
does, so results are upstream's (``full_vocab=True`` scores the whole vocabulary instead).

Two loops share these steps. :meth:`DualARGenerator.frames` runs upstream's left-padded batch (one
random stream for all rows, as upstream's ``generate`` with several prompts). :meth:`DualARGenerator.row`
is one request's row program (``engine.batching``): its own slow-AR state and generator, two ops per
frame, :class:`FrameOp` (the head, the semantic draw, the fast AR over the codebooks) and
:class:`SlowStepOp` (the slow AR's next column); in a batch the rows' ops run as one call each, alone
it computes what ``frames`` computes for one prompt.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from audiocpp.engine.batching import Op
from audiocpp.engine.errors import UsageError
from audiocpp.engine.nn.sampling import exponential_race, legacy_top_k_top_p

from .config import Audio8Config
from .model.dual_ar import DualAR
from .model.slow_ar import SlowHidden


@dataclass(frozen=True)
class SamplingOptions:
    max_new_tokens: int = 1024
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 50
    do_sample: bool = True

    def check(self) -> None:
        if self.max_new_tokens <= 0:
            raise UsageError("max_new_tokens must be positive")
        if self.temperature <= 0:
            raise UsageError("temperature must be positive", hint="use do_sample=false for greedy decoding")
        if self.top_k <= 0:
            raise UsageError("top_k must be positive")
        if not 0.0 < self.top_p <= 1.0:
            raise UsageError("top_p must be in (0, 1]")


@dataclass
class GenerateOutput:
    """``codes`` ``[B, num_codebooks, T]`` (-1 past a row's end), valid lengths, EOS flags."""

    codes: torch.Tensor
    code_lengths: torch.Tensor
    finished: torch.Tensor


def _temperature(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    return scores / torch.tensor(temperature, dtype=scores.dtype, device=scores.device).clamp_min(1e-5)


class SemanticScorer:
    """Turns the slow AR's head into upstream's processed semantic scores and draws."""

    def __init__(self, model: DualAR, full_vocab: bool = False) -> None:
        cfg = model.cfg
        self.cfg, self.slow = cfg, model.slow
        self.compact_head = model.slow.head == "compact"
        self.full_vocab = full_vocab and not self.compact_head
        vocab = cfg.vocab_size
        if self.compact_head:
            self.columns = None
        else:  # vocabulary ids of the compact scores: semantic ids, then EOS
            self.columns = torch.cat((torch.arange(cfg.semantic_begin_id, cfg.semantic_end_id + 1),
                                      torch.tensor([cfg.eos_token_id])))
        self.vocab = vocab

    # -- ids ----------------------------------------------------------------------------------
    def token_of(self, index: torch.Tensor) -> torch.Tensor:
        """Head index -> the token fed back (a vocabulary id)."""
        if not self.compact_head:
            return index
        cfg = self.cfg
        return torch.where(index < cfg.num_semantic, index + cfg.semantic_begin_id,
                           torch.full_like(index, cfg.eos_token_id))

    def is_semantic(self, index: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        if self.compact_head:
            return index < cfg.num_semantic
        return (index >= cfg.semantic_begin_id) & (index <= cfg.semantic_end_id)

    def first_code(self, index: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        offset = 0 if self.compact_head else cfg.semantic_begin_id
        return (index - offset).clamp(0, cfg.codebook_size - 1)

    # -- scores -------------------------------------------------------------------------------
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Compact ``[B, 4097]`` scores, or (``full_vocab``) the whole vocabulary."""
        if self.compact_head:
            return self.slow.semantic_logits(hidden)
        return self.slow.semantic_logits(hidden, compact=not self.full_vocab)

    def processed(self, logits: torch.Tensor, top_k: int, top_p: float, temperature: float) -> torch.Tensor:
        if self.compact_head:
            return _temperature(legacy_top_k_top_p(logits, top_k, top_p), temperature)
        if self.full_vocab:
            filtered = torch.full_like(logits, float("-inf"))
            cols = self.columns.to(logits.device)
            filtered[:, cols] = logits[:, cols]
            return _temperature(legacy_top_k_top_p(filtered, top_k, top_p), temperature)
        return _temperature(self._filter_compact(logits, top_k, top_p), temperature)

    def _filter_compact(self, scores: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
        """``legacy_top_k_top_p`` of the full vocabulary (-inf outside these columns), on the
        compact columns: the sorted scores are padded with -inf to the vocabulary for the
        softmax, so its sum is taken as upstream takes it."""
        n = scores.shape[-1]
        sorted_scores, sorted_indices = torch.sort(scores, descending=True, dim=-1)
        padded = torch.full((scores.shape[0], self.vocab), float("-inf"), dtype=scores.dtype, device=scores.device)
        padded[:, :n] = sorted_scores
        cumulative = torch.cumsum(torch.softmax(padded, dim=-1)[:, :n], dim=-1)
        positions = torch.arange(n, device=scores.device)
        threshold = torch.tensor(top_p, dtype=cumulative.dtype, device=cumulative.device)
        remove_sorted = (cumulative > threshold) | (positions >= top_k)
        remove_sorted[..., 0] = False
        remove = torch.zeros_like(remove_sorted).scatter(1, sorted_indices, remove_sorted)
        return scores.masked_fill(remove, float("-inf"))

    def full(self, scores: torch.Tensor) -> torch.Tensor:
        """Scores over the head's index space as upstream holds them (the vocabulary for 0.6B)."""
        if self.compact_head or self.full_vocab:
            return scores
        out = torch.full((scores.shape[0], self.vocab), float("-inf"), dtype=scores.dtype, device=scores.device)
        out[:, self.columns.to(scores.device)] = scores
        return out

    def sample(self, scores: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return exponential_race(self.full(scores), generator)

    def argmax(self, scores: torch.Tensor) -> torch.Tensor:
        return self.full(scores).argmax(dim=-1)


class DualARGenerator:
    """Runs the loop for one prompt batch; :meth:`frames` yields each step's frame."""

    def __init__(self, model: DualAR, *, full_vocab: bool = False) -> None:
        self.model, self.cfg = model, model.cfg
        self.scorer = SemanticScorer(model, full_vocab)

    def _sample_semantic(self, logits: torch.Tensor, opts: SamplingOptions, previous: torch.Tensor | None,
                         generator: torch.Generator | None) -> torch.Tensor:
        scorer, cfg = self.scorer, self.cfg
        regular = scorer.processed(logits, opts.top_k, opts.top_p, opts.temperature)
        if not opts.do_sample:
            return scorer.argmax(regular)
        normal = scorer.sample(regular, generator)
        high_scores = scorer.processed(logits, opts.top_k, cfg.ras_top_p, cfg.ras_temperature)
        high = scorer.sample(high_scores, generator)
        if previous is None:
            return normal
        repeated = (previous == normal[:, None]).any(dim=1)
        return torch.where(repeated & scorer.is_semantic(normal), high, normal)

    def _codebooks(self, fast_input: torch.Tensor, index: torch.Tensor, opts: SamplingOptions | list[SamplingOptions],
                   generator: torch.Generator | None | list[torch.Generator | None]) -> torch.Tensor:
        """The fast AR over the codebooks of ``B`` rows: one options and generator for all rows
        (upstream's batch), or a list of them, one per row (each row draws alone)."""
        fast = self.model.fast
        fast.start(fast_input)
        current = self.scorer.first_code(index)
        codes = [current]
        for position in range(1, self.cfg.num_codebooks):
            logits = fast.logits(current, position)
            if isinstance(opts, SamplingOptions):
                current = _draw_code(logits, opts, generator)  # type: ignore[arg-type]
            else:
                current = _cat([_draw_code(logits[b:b + 1], o, g)
                                for b, (o, g) in enumerate(zip(opts, generator))])  # type: ignore[arg-type]
            codes.append(current)
        return torch.stack(codes, dim=1)

    def max_steps(self, prompt_width: int, opts: SamplingOptions) -> int:
        limit = self.cfg.max_seq_len
        if prompt_width >= limit:
            raise UsageError(
                f"the prompt is {prompt_width} positions long; the model takes fewer than {limit}",
                hint="use a shorter reference audio / transcript, or a smaller text_chunk_size",
            )
        return min(opts.max_new_tokens, limit - prompt_width)

    @torch.inference_mode()
    def frames(self, prompt: torch.Tensor, prompt_mask: torch.Tensor, opts: SamplingOptions,
               generator: torch.Generator | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield ``(frame [B, num_codebooks], emitted [B])`` per step; ``frame`` is -1 where not
        emitted (EOS, or a row already finished)."""
        opts.check()
        model, cfg, scorer = self.model, self.cfg, self.scorer
        batch, _, width = prompt.shape
        steps = self.max_steps(width, opts)
        model.setup(batch, width + steps)
        slow = model.slow
        positions = prompt_mask.cumsum(-1).sub(1).clamp_min(0)
        hidden = slow.prefill(slow.embed(prompt), positions, prompt_mask)
        prompt_lengths = prompt_mask.sum(-1)
        previous: torch.Tensor | None = None
        finished = torch.zeros(batch, dtype=torch.bool, device=prompt.device)
        for step in range(steps):
            active_before = ~finished
            index = self._sample_semantic(scorer.logits(hidden.logits_input), opts, previous, generator)
            codebooks = self._codebooks(hidden.fast_input, index, opts, generator)
            token = scorer.token_of(index)
            emitted = active_before & (token != cfg.eos_token_id)
            yield torch.where(emitted[:, None], codebooks, -1), emitted
            if previous is None:
                previous = torch.zeros((batch, cfg.ras_window_size), dtype=torch.long, device=prompt.device)
            else:
                previous = previous.roll(-1, dims=1)
                previous[:, -1] = index
            finished |= token.eq(cfg.eos_token_id)
            if bool(finished.all()) or step == steps - 1:  # upstream runs one more slow step, unused
                break
            column = torch.cat((token[:, None], codebooks), dim=1).unsqueeze(-1)
            hidden = slow.step(slow.embed(column), (prompt_lengths + step)[:, None], active_before.long()[:, None])

    def row(self, prompt: torch.Tensor, opts: SamplingOptions,
            generator: torch.Generator | None) -> Generator[Any, Any, None]:
        """One request's row program for one prompt ``[1, 1 + num_codebooks, T]``: yields its ops
        and, per step, the frame ``[num_codebooks]`` (None at EOS, the last item)."""
        opts.check()
        cfg, scorer, slow = self.cfg, self.scorer, self.model.slow
        width = prompt.shape[-1]
        steps = self.max_steps(width, opts)
        state = slow.new_state(width + steps)
        mask = torch.ones((1, width), dtype=torch.long, device=prompt.device)
        with torch.inference_mode():
            hidden = slow.prefill(slow.embed(prompt), mask.cumsum(-1).sub(1).clamp_min(0), mask, state=state)
        row = FrameRow(hidden, None, opts, generator)
        for step in range(steps):
            index, codebooks = yield FrameOp(self, row)
            token = scorer.token_of(index)
            emitted = bool(token[0] != cfg.eos_token_id)
            yield codebooks[0] if emitted else None
            if row.previous is None:
                row.previous = torch.zeros((1, cfg.ras_window_size), dtype=torch.long, device=prompt.device)
            else:
                row.previous = row.previous.roll(-1, dims=1)
                row.previous[:, -1] = index
            if not emitted or step == steps - 1:  # upstream runs one more slow step, unused
                return
            column = torch.cat((token[:, None], codebooks), dim=1).unsqueeze(-1)
            row.hidden = yield SlowStepOp(self, state, column, width + step)

    def generate(self, prompt: torch.Tensor, prompt_mask: torch.Tensor, opts: SamplingOptions,
                 generator: torch.Generator | None) -> GenerateOutput:
        batch = prompt.shape[0]
        frames: list[torch.Tensor] = []
        lengths = torch.zeros(batch, dtype=torch.long)
        finished = torch.zeros(batch, dtype=torch.bool)
        for frame, emitted in self.frames(prompt, prompt_mask, opts, generator):
            frames.append(frame)
            emitted = emitted.cpu()
            lengths += emitted.long()
            finished |= ~emitted  # a row stops emitting at its EOS and never emits again
        if frames:
            codes = torch.stack(frames, dim=2)[:, :, : int(lengths.max())]
        else:
            codes = torch.empty((batch, self.cfg.num_codebooks, 0), dtype=torch.long)
        return GenerateOutput(codes=codes, code_lengths=lengths, finished=finished)


def _draw_code(logits: torch.Tensor, opts: SamplingOptions, generator: torch.Generator | None) -> torch.Tensor:
    scores = _temperature(legacy_top_k_top_p(logits, opts.top_k, opts.top_p), opts.temperature)
    return exponential_race(scores, generator) if opts.do_sample else scores.argmax(dim=-1)


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


@dataclass
class FrameRow:
    """A request's state between its ops: the slow AR's last output, its RAS window, its sampling."""

    hidden: SlowHidden
    previous: torch.Tensor | None
    opts: SamplingOptions
    generator: torch.Generator | None


class FrameOp(Op):
    """A row's next frame: the semantic head, the semantic draw (with RAS) and the fast AR over the
    codebooks, drawn from the row's own generator. Result: ``(index [1], codebooks [1, num_codebooks])``."""

    def __init__(self, generator: DualARGenerator, row: FrameRow) -> None:
        self.generator, self.row = generator, row

    def group_key(self) -> Hashable:
        return id(self.generator)

    @classmethod
    def run_group(cls, ops: Sequence[FrameOp]) -> list[Any]:
        gen = ops[0].generator
        rows = [op.row for op in ops]
        with torch.inference_mode():
            logits = gen.scorer.logits(_cat([r.hidden.logits_input for r in rows]))
            index = _cat([gen._sample_semantic(logits[b:b + 1], r.opts, r.previous, r.generator)
                          for b, r in enumerate(rows)])
            gen.model.fast.setup(len(rows))
            codebooks = gen._codebooks(_cat([r.hidden.fast_input for r in rows]), index,
                                       [r.opts for r in rows], [r.generator for r in rows])
        return [(index[b:b + 1], codebooks[b:b + 1]) for b in range(len(ops))]


class SlowStepOp(Op):
    """A row's next slow-AR column ``[1, 1 + num_codebooks, 1]`` at rotary ``position``, on its
    own state. Result: the new :class:`SlowHidden` (``[1, 1, dim]`` each)."""

    def __init__(self, generator: DualARGenerator, state: Any, column: torch.Tensor, position: int) -> None:
        self.generator, self.state, self.column, self.position = generator, state, column, position

    def group_key(self) -> Hashable:
        return id(self.generator)

    @classmethod
    def run_group(cls, ops: Sequence[SlowStepOp]) -> list[Any]:
        slow = ops[0].generator.model.slow
        device = ops[0].column.device
        positions = torch.tensor([[op.position] for op in ops], dtype=torch.long, device=device)
        with torch.inference_mode():
            hidden = slow.step_rows(slow.embed(_cat([op.column for op in ops])), positions, [op.state for op in ops])
        if len(ops) == 1:
            return [hidden]
        return [SlowHidden(hidden.logits_input[b:b + 1], hidden.fast_input[b:b + 1]) for b in range(len(ops))]


def prompt_tensor(rows: list[torch.Tensor], cfg: Audio8Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts ``[1 + num_codebooks, T_i]`` into a batch (row 0 padded with the pad id,
    code rows with 0) and its mask, as upstream ``_prepare_prompt`` does."""
    width = max(r.shape[1] for r in rows)
    prompt = torch.zeros((len(rows), cfg.num_codebooks + 1, width), dtype=torch.long)
    prompt[:, 0] = cfg.pad_token_id
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        start = width - row.shape[1]
        prompt[i, :, start:] = row
        mask[i, start:] = 1
    return prompt, mask
