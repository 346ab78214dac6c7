"""The residual vector quantizer of the Higgs Audio v2 codec (Euclidean codebooks with
``project_in`` / ``project_out``). Only ``codebook.embed`` is needed at inference; the
training statistics (``cluster_size``, ``embed_avg``, ``inited``) are dropped at load."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EuclideanCodebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("embed", torch.zeros(size, dim))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(..., dim) -> nearest entry ids, with upstream's distance arithmetic."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        embed = self.embed.t()
        dist = -(flat.pow(2).sum(1, keepdim=True) - 2 * flat @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices.view(*shape[:-1])

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.embed)


class VectorQuantization(nn.Module):
    def __init__(self, hidden: int, size: int, dim: int) -> None:
        super().__init__()
        self.codebook = EuclideanCodebook(size, dim)
        self.project_in = nn.Linear(hidden, dim)
        self.project_out = nn.Linear(dim, hidden)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, hidden, T) -> (B, T) ids."""
        return self.codebook.encode(self.project_in(x.permute(0, 2, 1)))

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, hidden, T)."""
        return self.project_out(self.codebook.decode(ids)).permute(0, 2, 1)


class ResidualVectorQuantizer(nn.Module):
    def __init__(self, num_quantizers: int, hidden: int, size: int, dim: int) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantization(hidden, size, dim) for _ in range(num_quantizers))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, hidden, T) -> (num_quantizers, B, T) codes."""
        residual = x
        codes = []
        for q in self.quantizers:
            ids = q.encode(residual)
            residual = residual - q.decode(ids)
            codes.append(ids)
        return torch.stack(codes)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(num_quantizers, B, T) codes -> (B, hidden, T), summed from zero as upstream does."""
        out = torch.full((), 0.0, device=codes.device)
        for q, ids in zip(self.quantizers, codes):
            out = out + q.decode(ids)
        return out
