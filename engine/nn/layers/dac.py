"""DAC-style convolution blocks: causal and centred convs, transposed upsampling, residual units.

Weight norm is folded at load time (``engine.weights.FoldWeightNorm`` reads both key styles:
``*.parametrizations.weight.original0/1`` and ``*.weight_g/_v``), so the convs here are plain
``nn.Conv1d`` / ``nn.ConvTranspose1d`` held as ``.conv`` where the checkpoints nest them.

Causal blocks also run incrementally: ``stream(x, state)`` takes the next samples of a
sequence and returns the outputs they complete, keeping what later calls need (the left
context of a conv, the last frame of a transposed conv) in ``state`` (a dict owned by the
caller, keyed by module). Concatenated stream outputs equal the offline output up to float
summation order.

The decoders also run **channels-last** (``forward_cl`` / ``stream_cl``, activations ``[B, L, C]``)
on the CPU: each conv is a few large GEMMs (one per tap, over blocks of rows that stay in cache)
instead of oneDNN's direct convolution, and no causal padding is copied. At Audio8's decoder sizes
this is about 1.5x faster; it sums in another order (float32 rounding, not bit-identical to
``forward``). The weights are relaid in place once (no second copy is kept).

Used by Audio8 TTS's codec only: OmniVoice's and VoxCPM's codecs keep private stacks, each saying
why at its top (centred strided convs and transformers' names; unnested convs and v1's padding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.snake_kernel import snake_fused, snake_passes
from . import activations

StreamState = dict[Any, torch.Tensor]

#: Output rows per GEMM block of the channels-last convs: the block and its inputs stay in L2.
ROW_BLOCK = 4096
#: Bytes of the gathered input block of :func:`causal_conv_rows_unfolded` (16-bit taps).
UNFOLDED_BYTES = 1 << 23


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``activations.snake`` bit for bit (same operations, same order), with one allocation
    instead of five: the elementwise passes run in place (about 2x faster on long signals)."""
    shape = x.shape
    x = x.reshape(shape[0], shape[1], -1)
    out = torch.mul(alpha, x)
    out.sin_()
    out.pow_(2)
    out.mul_((alpha + 1e-9).reciprocal())
    out.add_(x)
    return out.reshape(shape)


def snake_channels_last(x: torch.Tensor, alpha: torch.Tensor,
                        out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`snake` of ``x`` ``[..., C]`` (the same operations per element), rounded to
    ``out_dtype`` when given: one pass of the Snake kernel on the CPU (``engine.nn.kernels.snake_kernel``,
    the same numbers), else torch's passes."""
    fused = snake_fused(x, alpha, out_dtype)
    if fused is not None:
        return fused
    out = snake_passes(x, alpha)
    return out if out_dtype is None else out.to(out_dtype)


class Snake1d(activations.Snake1d):
    """``activations.Snake1d`` (parameter ``alpha`` of shape ``[1, C, 1]``) computed by :func:`snake`.

    ``out_dtype`` (channels-last only): the dtype its output is rounded to, set where a conv with
    16-bit weights takes it (the conv rounds its input to that dtype anyway)."""

    out_dtype: torch.dtype | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return snake(x, self.alpha)

    def forward_cl(self, x: torch.Tensor) -> torch.Tensor:
        return snake_channels_last(x, self.alpha, self.out_dtype)


def _relaid(param: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """``param.permute(order)`` contiguous, relaying ``param``'s storage in place the first time
    (``param`` keeps its shape, with other strides), so the GEMM operand needs no copy per call."""
    view = param.permute(order)
    if not view.is_contiguous():
        with torch.inference_mode(False), torch.no_grad():
            param.data = param.detach().permute(order).contiguous().permute(_inverse(order))
        view = param.permute(order)
    return view


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for i, axis in enumerate(order):
        inverse[axis] = i
    return tuple(inverse)


def causal_conv_rows(x: torch.Tensor, taps: torch.Tensor, bias: torch.Tensor | None, dilation: int,
                     left: int) -> torch.Tensor:
    """Stride-1 conv of ``x`` ``[L, C_in]`` after ``left`` implicit zero rows: ``[L + left - span, C_out]``
    with ``taps`` ``[k, C_in, C_out]``. Each block of output rows is one GEMM per tap, added in
    place (the last tap, which covers every row, first). 16-bit taps take
    :func:`causal_conv_rows_unfolded`."""
    if taps.dtype in (torch.bfloat16, torch.float16):
        return causal_conv_rows_unfolded(x, taps, bias, dilation, left)
    k, _, out_channels = taps.shape
    rows = x.shape[0] + left - (k - 1) * dilation
    out = x.new_empty(rows, out_channels)
    for start in range(0, rows, ROW_BLOCK):
        end = min(rows, start + ROW_BLOCK)
        block = out[start:end]
        for i, tap in enumerate((k - 1, *range(k - 1))):
            shift = tap * dilation - left
            first = max(start, -shift)
            if first >= end:
                continue
            source = x[first + shift:end + shift]
            if i == 0:
                if bias is None:
                    torch.mm(source, taps[tap], out=block)
                else:
                    torch.addmm(bias, source, taps[tap], out=block)
            else:
                block[first - start:].addmm_(source, taps[tap])
    return out


def causal_conv_rows_unfolded(x: torch.Tensor, taps: torch.Tensor, bias: torch.Tensor | None,
                              dilation: int, left: int) -> torch.Tensor:
    """:func:`causal_conv_rows` with 16-bit ``taps`` (``x`` float32 or in their dtype): each block
    of rows gathers its ``k`` shifted inputs side by side in the taps' dtype (``[rows, k * C_in]``)
    for one GEMM, so the taps and the bias are summed inside the GEMM (float32 accumulators) and
    each output is rounded once, to the taps' dtype (what comes next computes in float32 from it)."""
    k, in_channels, out_channels = taps.shape
    rows = x.shape[0] + left - (k - 1) * dilation
    out = taps.new_empty(rows, out_channels)
    matrix = taps.reshape(k * in_channels, out_channels)
    bias = None if bias is None else bias.to(taps.dtype)
    block_rows = max(64, min(ROW_BLOCK, UNFOLDED_BYTES // (k * in_channels * taps.element_size())))
    unfolded = taps.new_empty(min(rows, block_rows), k * in_channels)
    for start in range(0, rows, block_rows):
        end = min(rows, start + block_rows)
        block, gathered = out[start:end], unfolded[:end - start]
        for tap in range(k):
            shift = tap * dilation - left
            first = min(end, max(start, -shift))
            columns = gathered[:, tap * in_channels:(tap + 1) * in_channels]
            columns[:first - start].zero_()
            columns[first - start:].copy_(x[first + shift:end + shift])
        if bias is None:
            torch.mm(gathered, matrix, out=block)
        else:
            torch.addmm(bias, gathered, matrix, out=block)
    return out


def causal_conv_transpose_rows(x: torch.Tensor, weights: torch.Tensor, bias: torch.Tensor | None,
                               stride: int, carry: torch.Tensor | None
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal transposed conv of ``x`` ``[T, C_in]`` (``weights`` ``[C_in, k, C_out]``,
    ``stride <= k <= 2 * stride``): ``[T * stride, C_out]`` and the overlap its last frame adds to
    the next one's outputs (``carry`` in: the previous call's)."""
    _, k, out_channels = weights.shape
    overlap = k - stride
    frames = x.shape[0]
    # float32 under 16-bit weights too: the overlaps are summed in it
    out = x.new_empty(frames, stride, out_channels, dtype=torch.promote_types(x.dtype, torch.float32))
    matrix = weights.reshape(weights.shape[0], k * out_channels)
    block_frames = max(1, ROW_BLOCK // stride)
    for start in range(0, frames, block_frames):
        end = min(frames, start + block_frames)
        taps = torch.mm(x[start:end].to(matrix.dtype), matrix).view(end - start, k, out_channels)
        if bias is None:
            out[start:end] = taps[:, :stride]
        else:
            torch.add(taps[:, :stride], bias, out=out[start:end])
        if overlap:
            out[start + 1:end, :overlap] += taps[:-1, stride:]
            if carry is not None:
                out[start, :overlap] += carry
            carry = taps[-1, stride:].to(out.dtype)
    if carry is None:
        carry = out.new_zeros(overlap, out_channels)
    return out.view(frames * stride, out_channels), carry


def per_item(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``fn`` over the items of a batch ``[B, ...]`` (each item's GEMMs as when alone)."""
    return torch.stack([fn(item) for item in x]) if x.shape[0] != 1 else fn(x[0])[None]


def extra_padding(length: int, kernel_size: int, stride: int, padding_total: int = 0) -> int:
    """Right padding that makes the last window of a strided conv complete (DAC / encodec)."""
    frames = (length - kernel_size + padding_total) / stride + 1
    ideal = (math.ceil(frames) - 1) * stride + kernel_size - padding_total
    return ideal - length


def centred_conv1d(in_channels: int, out_channels: int, kernel_size: int, *, dilation: int = 1,
                   stride: int = 1, groups: int = 1, bias: bool = True) -> nn.Conv1d:
    """DAC's original (non-causal) conv: ``padding = dilation * (kernel_size - 1) // 2``."""
    return nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups,
                     padding=dilation * (kernel_size - 1) // 2, bias=bias)


class CausalConv1d(nn.Module):
    """Left-padded conv: ``(k - 1) * dilation + 1 - stride`` zeros before, and after whatever
    completes the last stride. The conv is ``.conv`` (checkpoint names ``<m>.conv.weight``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1,
                 stride: int = 1, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
                              groups=groups, bias=bias)
        self.stride = stride
        self.kernel_size = (kernel_size - 1) * dilation + 1
        self.padding = self.kernel_size - self.stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        right = extra_padding(x.shape[-1], self.kernel_size, self.stride, self.padding)
        return self.conv(F.pad(x, (self.padding, right))).contiguous()

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Incremental form (stride 1 only): the outputs of the new samples ``x``."""
        if self.stride != 1:
            raise ValueError("only stride-1 causal convs stream")
        if self.padding == 0:
            return self.conv(x).contiguous()
        past = state.get(self)
        if past is None:
            past = x.new_zeros(*x.shape[:-1], self.padding)
        full = torch.cat((past, x), dim=-1)
        state[self] = full[..., -self.padding:]
        return self.conv(full).contiguous()

    def _taps(self) -> torch.Tensor:
        if self.stride != 1 or self.conv.groups != 1:
            raise ValueError("only stride-1 ungrouped causal convs run channels-last")
        return _relaid(self.conv.weight, (2, 1, 0))

    def _rows(self, x: torch.Tensor, left: int) -> torch.Tensor:
        taps, dilation = self._taps(), self.conv.dilation[0]
        return per_item(lambda item: causal_conv_rows(item, taps, self.conv.bias, dilation, left), x)

    def forward_cl(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` on ``[B, L, C]`` (stride 1)."""
        return self._rows(x, self.padding)

    def stream_cl(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """:meth:`stream` on ``[B, n, C]``."""
        if self.padding:
            past = state.get(self)
            if past is None:
                past = x.new_zeros(x.shape[0], self.padding, x.shape[2])
            x = torch.cat((past, x), dim=1)
            state[self] = x[:, -self.padding:]
        return self._rows(x, 0)


class CausalConvTranspose1d(nn.Module):
    """Transposed conv that crops ``kernel_size - stride`` samples at the end (causal upsampling)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 dilation: int = 1) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                       dilation=dilation)
        self.stride = stride
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        crop = self.kernel_size - self.stride
        return x[..., : x.shape[-1] - crop].contiguous() if crop else x.contiguous()

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Incremental form for ``kernel_size <= 2 * stride``: ``stride`` outputs per new frame."""
        s, k = self.stride, self.kernel_size
        if k > 2 * s or self.conv.dilation[0] != 1:
            raise ValueError("this transposed conv does not stream (kernel > 2 * stride or dilated)")
        if k == s and x.device.type == "cpu":
            return per_item(self._frames_apart, x)
        past = state.get(self)
        if past is None:
            past = x.new_zeros(*x.shape[:-1], 1)
        full = torch.cat((past, x), dim=-1)
        state[self] = x[..., -1:]
        y = self.conv(full)
        return y[..., s: s + x.shape[-1] * s].contiguous()

    def _frames_apart(self, x: torch.Tensor) -> torch.Tensor:
        """Output ``[C_out, T * k]`` of one item ``x`` ``[C_in, T]`` when ``kernel_size == stride``:
        the frames do not overlap, so it is one GEMM (``[T, C_in] @ [C_in, C_out * k]``) plus the
        bias, and nothing is kept between calls. Torch's direct transposed conv of a few frames
        (``slow_conv_transpose2d``) is about 3x slower at Audio8's quantizer sizes; the sums are
        the same, in another order (float32 rounding)."""
        weight = self.conv.weight  # [C_in, C_out, k]
        columns = x.transpose(0, 1) @ weight.reshape(weight.shape[0], -1)  # [T, C_out * k]
        y = columns.view(x.shape[1], weight.shape[1], self.kernel_size).permute(1, 0, 2)
        y = y.reshape(weight.shape[1], -1)
        return y if self.conv.bias is None else y.add_(self.conv.bias[:, None])

    def _weights(self) -> torch.Tensor:
        if not self.stride <= self.kernel_size <= 2 * self.stride or self.conv.dilation[0] != 1:
            raise ValueError("only undilated transposed convs with stride <= kernel <= 2 * stride "
                             "run channels-last")
        return _relaid(self.conv.weight, (0, 2, 1))

    def forward_cl(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` on ``[B, T, C]``."""
        weights = self._weights()
        return per_item(lambda item: causal_conv_transpose_rows(item, weights, self.conv.bias, self.stride,
                                                                None)[0], x)

    def stream_cl(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """:meth:`stream` on ``[B, n, C]`` (keeps each item's overlap into the next frame)."""
        weights = self._weights()
        carries = state.get(self)
        outs, new = [], []
        for i, item in enumerate(x):
            out, carry = causal_conv_transpose_rows(item, weights, self.conv.bias, self.stride,
                                                    None if carries is None else carries[i])
            outs.append(out)
            new.append(carry)
        state[self] = torch.stack(new)
        return torch.stack(outs)


class ResidualUnit(nn.Module):
    """``x + conv1x1(snake(conv_k(snake(x))))`` (``block.0..3``); the residual is trimmed to
    the output length, at the end when causal, on both sides when centred (DAC)."""

    def __init__(self, dim: int, dilation: int, kernel_size: int = 7, *, causal: bool = True) -> None:
        super().__init__()
        self.causal = causal
        if causal:
            convs: tuple[nn.Module, nn.Module] = (CausalConv1d(dim, dim, kernel_size, dilation=dilation),
                                                  CausalConv1d(dim, dim, 1))
        else:
            convs = (centred_conv1d(dim, dim, kernel_size, dilation=dilation), centred_conv1d(dim, dim, 1))
        self.block = nn.Sequential(Snake1d(dim), convs[0], Snake1d(dim), convs[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        diff = x.shape[-1] - y.shape[-1]
        if diff > 0:
            x = x[..., :-diff] if self.causal else x[..., diff // 2: x.shape[-1] - (diff - diff // 2)]
        return x + y

    def stream(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        if not self.causal:
            raise ValueError("a centred residual unit does not stream")
        snake1, conv1, snake2, conv2 = self.block
        y = conv2.stream(snake2(conv1.stream(snake1(x), state)), state)
        return x + y

    def forward_cl(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` on ``[B, L, C]`` (causal)."""
        if not self.causal:
            raise ValueError("a centred residual unit does not run channels-last")
        return x + forward_channels_last(self.block, x)

    def stream_cl(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        return x + stream_channels_last(self.block, x, state)


def stream_sequential(modules: nn.Sequential | list[nn.Module], x: torch.Tensor,
                      state: StreamState) -> torch.Tensor:
    """Run modules in order, streaming the ones that keep state; pointwise ones run as they are."""
    for module in modules:
        stream = getattr(module, "stream", None)
        x = stream(x, state) if stream is not None else module(x)
    return x


#: Modules that act on each element alone, so they run on channels-last activations as they are.
POINTWISE = (nn.Tanh, nn.Identity)


def _forward_cl(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    fn = getattr(module, "forward_cl", None)
    if fn is not None:
        return fn(x)
    if not isinstance(module, POINTWISE):
        raise TypeError(f"{type(module).__name__} has no forward_cl and is not pointwise")
    return module(x)


def forward_channels_last(modules: nn.Sequential | list[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """Run modules in order on ``x`` ``[B, L, C]`` with their ``forward_cl``."""
    for module in modules:
        x = _forward_cl(module, x)
    return x


def stream_channels_last(modules: nn.Sequential | list[nn.Module], x: torch.Tensor,
                         state: StreamState) -> torch.Tensor:
    """:func:`stream_sequential` on ``x`` ``[B, n, C]``: the modules' ``stream_cl``; modules that
    keep no state (Snake, pointwise) run their ``forward_cl`` as they are."""
    for module in modules:
        stream = getattr(module, "stream_cl", None)
        x = stream(x, state) if stream is not None else _forward_cl(module, x)
    return x
