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

from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from audiocpp.engine.batching import Op
from audiocpp.engine.errors import UsageError
from audiocpp.engine.nn.layers.column_sampling import ScoreColumns
from audiocpp.engine.nn.layers.sampling import as_threshold, exponential_race, legacy_top_k_top_p

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


def _temperature(scores: torch.Tensor, temperature: float | torch.Tensor) -> torch.Tensor:
    return scores / as_threshold(temperature, scores).clamp_min(1e-5)


Param = int | float | torch.Tensor


@dataclass
class RowSampling:
    """The sampling of a batch's rows: ``top_k`` / ``top_p`` / ``temperature`` as one value when
    every row agrees (then each row computes exactly what it computes alone), else ``[B, 1]``
    tensors; which rows sample (the rest decode greedily) and their generators."""

    top_k: Param
    top_p: Param
    temperature: Param
    sampled: list[int]
    generators: list[torch.Generator | None]
    size: int

    @classmethod
    def of(cls, opts: list[SamplingOptions], generators: list[torch.Generator | None]) -> RowSampling:
        def param(name: str, dtype: torch.dtype) -> Param:
            values = [getattr(o, name) for o in opts]
            if all(v == values[0] for v in values):
                return values[0]
            return torch.tensor(values, dtype=dtype).view(-1, 1)

        sampled = [b for b, o in enumerate(opts) if o.do_sample]
        return cls(param("top_k", torch.long), param("top_p", torch.float32),
                   param("temperature", torch.float32),
                   sampled, [generators[b] for b in sampled], len(opts))

    @property
    def all_sampled(self) -> bool:
        return len(self.sampled) == self.size

    def take(self, x: Param) -> Param:
        """``x`` (a ``[B, ...]`` tensor or one value) for the sampled rows only."""
        if not isinstance(x, torch.Tensor) or self.all_sampled:
            return x
        return x[torch.tensor(self.sampled, device=x.device)]

    def merge(self, greedy: torch.Tensor | None, drawn: torch.Tensor | None) -> torch.Tensor:
        """Indices ``[B]``: the draws at the sampled rows, the greedy choice elsewhere."""
        if greedy is None:
            assert drawn is not None
            return drawn
        if drawn is None:
            return greedy
        out = greedy.clone()
        out[torch.tensor(self.sampled, device=out.device)] = drawn
        return out


class SemanticScorer:
    """Turns the slow AR's head into upstream's processed semantic scores and draws."""

    def __init__(self, model: DualAR, full_vocab: bool = False) -> None:
        cfg = model.cfg
        self.cfg, self.slow = cfg, model.slow
        self.compact_head = model.slow.head == "compact"
        self.full_vocab = full_vocab and not self.compact_head
        vocab = cfg.vocab_size
        self.columns = self.space = None
        if not self.compact_head:  # vocabulary ids of the compact scores: semantic ids, then EOS
            self.columns = torch.cat((torch.arange(cfg.semantic_begin_id, cfg.semantic_end_id + 1),
                                      torch.tensor([cfg.eos_token_id])))
            if not self.full_vocab:  # draws over the whole vocabulary without building it
                self.space = ScoreColumns.of(self.columns, vocab)
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

    def processed(self, logits: torch.Tensor, top_k: Param, top_p: Param, temperature: Param) -> torch.Tensor:
        if self.compact_head:
            return _temperature(legacy_top_k_top_p(logits, top_k, top_p), temperature)
        if self.full_vocab:
            filtered = torch.full_like(logits, float("-inf"))
            cols = self.columns.to(logits.device)
            filtered[:, cols] = logits[:, cols]
            return _temperature(legacy_top_k_top_p(filtered, top_k, top_p), temperature)
        return _temperature(legacy_top_k_top_p(logits, top_k, top_p, vocab=self.vocab), temperature)

    def full(self, scores: torch.Tensor) -> torch.Tensor:
        """Scores over the head's index space as upstream holds them (the vocabulary for 0.6B)."""
        return scores if self.space is None else self.space.whole(scores)

    def sample(self, scores: torch.Tensor, generator: torch.Generator | None | list[torch.Generator | None]
               ) -> torch.Tensor:
        """One draw per row: from one generator, or from each row's own (a list). Over the whole
        vocabulary as upstream draws, computed on the compact columns where that is exact here
        (``engine.nn.layers.column_sampling``)."""
        if self.space is not None:
            drawn = self.space.race(scores, generator)
            if drawn is not None:
                return drawn
        return exponential_race(self.full(scores), generator)

    def argmax(self, scores: torch.Tensor) -> torch.Tensor:
        return self.full(scores).argmax(dim=-1) if self.space is None else self.space.argmax(scores)


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

    def _sample_semantic_rows(self, logits: torch.Tensor, rows: list[FrameRow],
                              sampling: RowSampling) -> torch.Tensor:
        """:meth:`_sample_semantic` of rows that each sample on their own (own options, window
        and generator), the filters and softmaxes over all rows at once."""
        scorer, cfg = self.scorer, self.cfg
        regular = scorer.processed(logits, sampling.top_k, sampling.top_p, sampling.temperature)
        greedy = None if sampling.all_sampled else scorer.argmax(regular)
        if not sampling.sampled:
            return greedy
        take = sampling.take
        normal = scorer.sample(take(regular), sampling.generators)
        high = scorer.sample(scorer.processed(take(logits), take(sampling.top_k), cfg.ras_top_p,
                                              cfg.ras_temperature),
                             sampling.generators)
        windows = [rows[b].previous for b in sampling.sampled]
        if all(w is None for w in windows):
            drawn = normal
        else:
            previous = torch.cat([w if w is not None
                                  else torch.full((1, cfg.ras_window_size), -1, dtype=torch.long,
                                                  device=normal.device)
                                  for w in windows])
            repeated = (previous == normal[:, None]).any(dim=1)
            drawn = torch.where(repeated & scorer.is_semantic(normal), high, normal)
        return sampling.merge(greedy, drawn)

    def _codebooks(self, fast_input: torch.Tensor, index: torch.Tensor,
                   draw: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """The fast AR over the codebooks of ``B`` rows; ``draw`` turns a position's logits
        ``[B, codebook_size]`` into its codes."""
        fast = self.model.fast
        fast.start(fast_input)
        current = self.scorer.first_code(index)
        codes = [current]
        for position in range(1, self.cfg.num_codebooks):
            current = draw(fast.logits(current, position))
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
            codebooks = self._codebooks(hidden.fast_input, index,
                                        lambda logits: _draw_code(logits, opts, generator))
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
            hidden = slow.step(slow.embed(column), (prompt_lengths + step)[:, None],
                               active_before.long()[:, None])

    def row(self, prompt: torch.Tensor, opts: SamplingOptions,
            generator: torch.Generator | None) -> Generator[Any, Any, None]:
        """One request's row program for one prompt ``[1, 1 + num_codebooks, T]``: yields its ops
        (one :class:`FrameOp` per frame) and, per frame, the frame ``[num_codebooks]`` (None at EOS,
        the last item)."""
        opts.check()
        cfg, scorer, slow = self.cfg, self.scorer, self.model.slow
        width = prompt.shape[-1]
        steps = self.max_steps(width, opts)
        state = slow.new_state(width + steps)
        mask = torch.ones((1, width), dtype=torch.long, device=prompt.device)
        with torch.inference_mode():
            hidden = slow.prefill(slow.embed(prompt), mask.cumsum(-1).sub(1).clamp_min(0), mask, state=state)
        row = FrameRow(state, hidden, None, opts, generator)
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
            # the next frame's op feeds this one back through the slow AR first
            row.column, row.position = (torch.cat((token[:, None], codebooks), dim=1).unsqueeze(-1),
                                        width + step)

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


def _draw_code(logits: torch.Tensor, opts: SamplingOptions,
               generator: torch.Generator | None) -> torch.Tensor:
    scores = _temperature(legacy_top_k_top_p(logits, opts.top_k, opts.top_p), opts.temperature)
    return exponential_race(scores, generator) if opts.do_sample else scores.argmax(dim=-1)


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


@dataclass
class FrameRow:
    """A request's state between its ops: its slow-AR state and last output, the column to feed
    back before its next frame (None after the prompt), its RAS window and sampling."""

    state: Any
    hidden: SlowHidden
    previous: torch.Tensor | None
    opts: SamplingOptions
    generator: torch.Generator | None
    column: torch.Tensor | None = None  # [1, 1 + num_codebooks, 1]
    position: int = 0  # the column's rotary position


class FrameOp(Op):
    """A row's next frame: the slow AR's step over the row's previous frame (when it has one),
    the semantic head, the semantic draw (with RAS) and the fast AR over the codebooks, drawn from
    the row's own generator. Result: ``(index [1], codebooks [1, num_codebooks])``; the row's
    ``hidden`` is updated."""

    def __init__(self, generator: DualARGenerator, row: FrameRow) -> None:
        self.generator, self.row = generator, row

    def group_key(self) -> Hashable:
        # every session of one network (per dtype) has its own generator: rows share the network
        return (id(self.generator.model), self.generator.scorer.full_vocab)

    @classmethod
    def run_group(cls, ops: Sequence[FrameOp]) -> list[Any]:
        gen = ops[0].generator
        rows = [op.row for op in ops]
        with torch.inference_mode():
            _step_slow(gen, [r for r in rows if r.column is not None])
            logits = gen.scorer.logits(_cat([r.hidden.logits_input for r in rows]))
            sampling = RowSampling.of([r.opts for r in rows], [r.generator for r in rows])
            index = gen._sample_semantic_rows(logits, rows, sampling)
            gen.model.fast.setup(len(rows))
            codebooks = gen._codebooks(_cat([r.hidden.fast_input for r in rows]), index,
                                       lambda logits: _draw_code_rows(logits, sampling))
        return [(index[b:b + 1], codebooks[b:b + 1]) for b in range(len(ops))]


def _step_slow(gen: DualARGenerator, rows: list[FrameRow]) -> None:
    """Feed each row's pending column through the slow AR (one batched step), on its own state."""
    if not rows:
        return
    slow = gen.model.slow
    device = rows[0].column.device
    positions = torch.tensor([[r.position] for r in rows], dtype=torch.long, device=device)
    hidden = slow.step_rows(slow.embed(_cat([r.column for r in rows])), positions, [r.state for r in rows])
    for b, r in enumerate(rows):
        r.hidden = hidden if len(rows) == 1 else SlowHidden(hidden.logits_input[b:b + 1],
                                                            hidden.fast_input[b:b + 1])
        r.column = None


def _draw_code_rows(logits: torch.Tensor, sampling: RowSampling) -> torch.Tensor:
    """:func:`_draw_code` of rows with their own options and generators, filtered together."""
    scores = _temperature(legacy_top_k_top_p(logits, sampling.top_k, sampling.top_p), sampling.temperature)
    greedy = None if sampling.all_sampled else scores.argmax(dim=-1)
    drawn = exponential_race(sampling.take(scores), sampling.generators) if sampling.sampled else None
    return sampling.merge(greedy, drawn)


def prefill_tensors(rows: list[torch.Tensor], cfg: Audio8Config) -> tuple[torch.Tensor, torch.Tensor]:
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
