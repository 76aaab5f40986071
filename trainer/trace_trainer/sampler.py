"""Batched sampling with a KV cache, written out so the distribution is exactly softmax(logits / T)
(no top-k/top-p defaults from a model's generation config) and the sampled ids are returned as-is."""
from __future__ import annotations

import torch


@torch.no_grad()
def sample(model, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, stop_ids, pad_id: int,
           generator: torch.Generator | None = None) -> list[list[int]]:
    """Continues each prompt until a stop id (included in the result) or `max_new_tokens`; draws
    from `generator` when given (a seeded request), else from torch's global RNG."""
    device = next(model.parameters()).device
    n, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((n, width), pad_id, dtype=torch.long, device=device)
    attn = torch.zeros((n, width), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):  # left padding keeps every row's next token at the last column
        ids[i, width - len(p):] = torch.tensor(p, device=device)
        attn[i, width - len(p):] = 1
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    stop = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)
    results: list[list[int]] = [[] for _ in range(n)]
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    for _ in range(max_new_tokens):
        logits = out.logits[:, -1, :].float()
        if temperature > 0:
            nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator).squeeze(-1)
        else:
            nxt = logits.argmax(-1)
        for i, t in enumerate(nxt.tolist()):
            if not finished[i]:
                results[i].append(t)
        finished |= torch.isin(nxt, stop)
        if bool(finished.all()):
            break
        attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=device)], dim=1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=nxt.unsqueeze(-1), attention_mask=attn, position_ids=pos, past_key_values=out.past_key_values, use_cache=True)
    return results


def in_process(model, fmt, temperature: float):
    """The rollout generator `(prompts, max_new_tokens) -> sampled ids per prompt` on a local model."""
    def generate(prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        return sample(model, prompts, max_new_tokens=max_new_tokens, temperature=temperature, stop_ids=fmt.stop_ids,
                      pad_id=fmt.tok.pad_token_id)
    return generate
