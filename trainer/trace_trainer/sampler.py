"""Batched sampling with a KV cache, written out so the distribution is exactly softmax(logits / T)
(no top-k/top-p defaults from a model's generation config) over the tokens an optional action
grammar allows, and the sampled ids are returned as-is. Identical prompts (the K rollouts of a
group) share one prefill and the prefix all prompts share runs once; logits are computed only at
the position being sampled."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .batching import pad
from .grammar import ActionGrammar, unpack


@dataclass
class Samples:
    ids: list[list[int]]
    # log-prob of each sampled token under the distribution it was drawn from (masked, at T).
    logprobs: list[list[float]] = field(default_factory=list)


# Below this many shared tokens a separate forward for the prefix costs more than it saves.
MIN_SHARED_PREFIX = 16


def shared_prefix(prompts: list[list[int]]) -> int:
    """Length of the prefix every sequence shares."""
    n = min(len(p) for p in prompts)
    for i in range(n):
        t = prompts[0][i]
        if any(p[i] != t for p in prompts[1:]):
            return i
    return n


def _prefill(model, prompts: list[list[int]], pad_id: int, device):
    """One forward over the distinct prompts, its cache and last logits expanded to every row. The
    prefix all distinct prompts share (system prompt and tools; at later turns the whole first
    prompt of a group) runs once, and only the rest of each prompt runs per row, left-padded
    after the prefix (masked, so it is invisible)."""
    distinct: dict[tuple, int] = {}
    rows = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    uniq = [list(p) for p in distinct]
    # Every row keeps at least its last token: its logits are the first to sample from.
    shared = min(shared_prefix(uniq), min(len(p) for p in uniq) - 1) if len(uniq) > 1 else 0
    if shared >= MIN_SHARED_PREFIX:
        head = model(input_ids=torch.tensor([uniq[0][:shared]], device=device), use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.reorder_cache(torch.zeros(len(uniq), dtype=torch.long, device=device))
        ids, tail_attn = pad([p[shared:] for p in uniq], pad_id, left=True, device=device)
        attn = torch.cat([torch.ones((len(uniq), shared), dtype=tail_attn.dtype, device=device), tail_attn], dim=1)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos[:, shared:], past_key_values=cache, use_cache=True,
                    logits_to_keep=1)
    else:
        ids, attn = pad(uniq, pad_id, left=True, device=device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1)
    cache, logits = out.past_key_values, out.logits[:, -1, :]
    if len(distinct) < len(prompts):
        index = torch.tensor(rows, device=device)
        cache.reorder_cache(index)  # copies each layer's keys/values to the rows that share them
        logits, attn, pos = logits[index], attn[index], pos[index]
    return cache, logits, attn, pos[:, -1:]


@torch.no_grad()
def sample(model, prompts: list[list[int]], *, max_new_tokens: int | list[int], temperature: float, stop_ids, pad_id: int,
           generator: torch.Generator | None = None, grammar: ActionGrammar | None = None,
           logit_bias: torch.Tensor | None = None) -> Samples:
    """Continues each prompt until a stop id (included in the result) or its own `max_new_tokens`;
    under `grammar`, only the tokens it allows (with its bias), until it has accepted the turn
    terminator; `logit_bias` [V] is added to every step's logits (a request's own). Draws from
    `generator` when given (a seeded request), else from torch's global RNG."""
    device = next(model.parameters()).device
    n = len(prompts)
    caps = [max_new_tokens] * n if isinstance(max_new_tokens, int) else list(max_new_tokens)
    cache, logits, attn, pos = _prefill(model, prompts, pad_id, device)
    stop = set(stop_ids)
    matchers = [grammar.matcher() for _ in range(n)] if grammar else None
    bitmask = grammar.new_bitmask(n) if grammar else None
    results: list[list[int]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    finished = [c <= 0 for c in caps]
    rows = list(range(n))  # the prompt each batch row continues
    while not all(finished):
        # Rows that finished leave the batch (their cache rows dropped) once they are a quarter of it.
        done_rows = [j for j, i in enumerate(rows) if finished[i]]
        if done_rows and len(done_rows) * 4 >= len(rows) and len(done_rows) < len(rows):
            keep = [j for j, i in enumerate(rows) if not finished[i]]
            index = torch.tensor(keep, device=device)
            cache.reorder_cache(index)
            logits, attn, pos, rows = logits[index], attn[index], pos[index], [rows[j] for j in keep]
        b = len(rows)
        logits = logits.float()
        if logit_bias is not None:
            logits = logits[:, : logit_bias.shape[0]] + logit_bias.to(device)
        if matchers:
            for j, i in enumerate(rows):
                if not finished[i]:
                    matchers[i].fill_next_token_bitmask(bitmask, j)
            allowed = unpack(bitmask[:b], grammar.vocab_size).to(device)
            stuck = [i for j, i in enumerate(rows) if not finished[i] and not bool(allowed[j].any())]
            if stuck:  # e.g. a word-level vocabulary that cannot spell JSON
                raise ValueError(f"the action grammar allows no token of this vocabulary after {results[stuck[0]]!r}: "
                                 "this tokenizer cannot write the JSON actions; set training.constrainedDecoding to false")
            logits = grammar.constrain(logits, allowed)
        if temperature > 0:
            lp = torch.log_softmax(logits / temperature, dim=-1)
            nxt = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(-1)
        else:
            lp = torch.log_softmax(logits, dim=-1)
            nxt = logits.argmax(-1)
        chosen = lp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1).tolist()
        for j, t in enumerate(nxt.tolist()):
            i = rows[j]
            if finished[i]:
                continue
            results[i].append(t)
            logps[i].append(chosen[j])
            if matchers:
                matchers[i].accept_token(t)
            done = matchers[i].is_terminated() if matchers else t in stop
            finished[i] = done or len(results[i]) >= caps[i]
        if all(finished):
            break
        attn = torch.cat([attn, torch.ones((b, 1), dtype=attn.dtype, device=device)], dim=1)
        pos = pos + 1
        out = model(input_ids=nxt.unsqueeze(-1), attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1, :]
    return Samples(results, logps)


def in_process(model, fmt, temperature: float):
    """The rollout generator `(prompts, per-prompt max new tokens, grammar) -> Samples` on a local model."""
    def generate(prompts: list[list[int]], max_new_tokens: list[int], grammar: ActionGrammar | None = None) -> Samples:
        return sample(model, prompts, max_new_tokens=max_new_tokens, temperature=temperature, stop_ids=fmt.stop_ids,
                      pad_id=fmt.tok.pad_token_id, grammar=grammar)
    return generate
