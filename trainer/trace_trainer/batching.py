"""Batches of token sequences (padding) and the seeding every run starts from."""
from __future__ import annotations

import random

import numpy as np
import torch


def pad(seqs: list[list], value, *, left: bool = False, dtype=torch.long, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequences as one [B, longest] tensor filled with `value` where a row is shorter, and the
    attention mask (1 on real entries). Right padding for training; left padding for sampling,
    so that every row's next token is at the last column."""
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), value, dtype=dtype)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        cols = slice(width - len(s), width) if left else slice(0, len(s))
        out[i, cols] = torch.tensor(s, dtype=dtype)
        attn[i, cols] = 1
    return out.to(device), attn.to(device)


def seed_all(seed: int) -> None:
    """Python's, NumPy's and torch's global generators, so a run is repeatable from its config."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
