"""Grouped-query attention without copying the KV cache. Transformers' SDPA path repeats each
key/value head to every query head it serves (`repeat_kv`) whenever there is a padding mask, which
is every batched sampling step: for SmolLM2 (9 query heads, 3 KV heads) that copies 3× the whole
cache per decoded token. Folding the query heads of a group into the query-length axis instead
gives the same attention with the cache read in place (same kernel, same result)."""
from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "sdpa_grouped"


def _grouped_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                  is_causal: bool | None = None, **kwargs):
    b, h, q, d = query.shape
    rep = h // key.shape[1]
    if rep == 1 or dropout or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    s = key.shape[2]
    mask = attention_mask
    if mask is None:
        # No padding: causal over the last q of s positions (a plain decode step has q = 1 and sees everything).
        mask = torch.arange(q, device=query.device)[:, None] + (s - q) >= torch.arange(s, device=query.device)[None, :]
        mask = mask[None, None]
    # Query head kv*rep + r attends with KV head kv (repeat_kv's order): row r*q + t of group kv.
    mask = mask.unsqueeze(2).expand(-1, -1, rep, q, -1).reshape(mask.shape[0], mask.shape[1], rep * q, s)
    out = torch.nn.functional.scaled_dot_product_attention(query.reshape(b, h // rep, rep * q, d), key, value,
                                                           attn_mask=mask, scale=scaling)
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, _grouped_sdpa)
AttentionMaskInterface.register(NAME, sdpa_mask)


def use_grouped_attention(model) -> None:
    """Switches a model on transformers' SDPA attention to the grouped form (others are left alone)."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        model.set_attn_implementation(NAME)
