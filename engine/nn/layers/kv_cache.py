"""A static KV cache: fixed-size buffers written in place, so decode steps keep one shape."""

from __future__ import annotations

import torch


class StaticKVCache:
    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        max_length: int,
        *,
        batch_size: int = 1,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, 2, batch_size, num_kv_heads, max_length, head_dim)
        self.buffer = torch.zeros(shape, dtype=dtype, device=device)
        self.max_length = max_length
        self.length = 0

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.buffer[i, 0], self.buffer[i, 1]

    def check_room(self, start: int, length: int) -> None:
        """Raise where positions ``start .. start+length`` do not fit."""
        if start + length > self.max_length:
            raise RuntimeError(f"KV cache overflow: position {start + length} > capacity {self.max_length}")

    def write(self, i: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k, v`` of shape (B, H, T, D) at positions ``start .. start+T``."""
        self.check_room(start, k.shape[2])
        end = start + k.shape[2]
        self.buffer[i, 0, :, :, start:end] = k
        self.buffer[i, 1, :, :, start:end] = v

    def reset(self) -> None:
        self.length = 0
