"""The sampler's shortcuts change nothing: grouped-query attention reads the KV cache in place with
the same result as transformers' SDPA, and a prefix shared by all prompts, run once, gives the
same distributions as running every prompt whole."""
import torch

from trace_trainer import sampler
from trace_trainer.attention import NAME
from trace_trainer.sampler import sample
from trace_trainer.tiny import build_model


def _padded(tok, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), tok.pad_token_id)
    attn = torch.zeros((len(lengths), width), dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, width - n:] = torch.randint(4, len(tok), (n,), generator=g)
        attn[i, width - n:] = 1
    return ids, attn, (attn.cumsum(-1) - 1).clamp(min=0)


def test_grouped_attention_equals_sdpa_in_prefill_decode_and_gradients(tool_tok):
    model = build_model(len(tool_tok), heads=4, kv_heads=2)  # 2 query heads per KV head
    assert model.config._attn_implementation == NAME
    ids, attn, pos = _padded(tool_tok, [9, 5, 7])
    results = []
    for impl in (NAME, "sdpa"):
        model.set_attn_implementation(impl)
        model.zero_grad()
        with torch.enable_grad():
            out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
            out.logits[attn.bool()].logsumexp(-1).sum().backward()
        with torch.no_grad():  # one decode step on the cache, a new token per row
            a = torch.cat([attn, torch.ones((3, 1), dtype=attn.dtype)], 1)
            step = model(input_ids=torch.tensor([[5], [6], [7]]), attention_mask=a, position_ids=pos[:, -1:] + 1,
                         past_key_values=out.past_key_values, use_cache=True)
        results.append((out.logits[attn.bool()].detach(), step.logits.detach(), [p.grad.clone() for p in model.parameters()]))
    (la, sa, ga), (lb, sb, gb) = results
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sa, sb, atol=1e-5, rtol=1e-5)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_a_prefix_shared_by_all_prompts_runs_once_with_the_same_result(tool_tok, monkeypatch):
    model = build_model(len(tool_tok))
    g = torch.Generator().manual_seed(3)
    prefix = torch.randint(4, len(tool_tok), (20,), generator=g).tolist()
    # Distinct tails of different lengths, and two identical prompts (a group).
    tails = [torch.randint(4, len(tool_tok), (n,), generator=g).tolist() for n in (1, 6, 3)]
    prompts = [prefix + tails[0], prefix + tails[1], prefix + tails[1], prefix + tails[2]]
    forwards = []
    original = model.forward

    def counted(*args, **kw):
        forwards.append(kw["input_ids"].shape)
        return original(*args, **kw)

    monkeypatch.setattr(model, "forward", counted)
    runs = []
    for shared in (10**9, 16):  # off, then on
        monkeypatch.setattr(sampler, "MIN_SHARED_PREFIX", shared)
        forwards.clear()
        out = sample(model, prompts, max_new_tokens=[6, 6, 6, 6], temperature=1.0, stop_ids=[], pad_id=tool_tok.pad_token_id,
                     generator=torch.Generator().manual_seed(11))
        runs.append((out, list(forwards)))
    (plain, plain_fw), (shared, shared_fw) = runs
    assert plain_fw[0] == (3, 26)  # the distinct prompts, whole
    assert shared_fw[0] == (1, 20) and shared_fw[1] == (3, 6)  # the prefix once, then the distinct tails
    assert shared.ids == plain.ids
    torch.testing.assert_close(torch.tensor(shared.logprobs), torch.tensor(plain.logprobs), atol=1e-5, rtol=1e-5)


def test_rows_that_finish_leave_the_batch_without_changing_the_others(tool_tok):
    """Greedy, each prompt alone vs all together with different budgets: the batch drops rows as
    they finish (their cache rows too), and every row's continuation stays the same."""
    model = build_model(len(tool_tok))
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(4, len(tool_tok), (n,), generator=g).tolist() for n in (7, 12, 9, 12, 5)]
    caps = [1, 8, 2, 5, 3]
    kw = dict(temperature=0.0, stop_ids=[], pad_id=tool_tok.pad_token_id)
    together = sample(model, prompts, max_new_tokens=caps, **kw)
    alone = [sample(model, [p], max_new_tokens=[c], **kw) for p, c in zip(prompts, caps)]
    assert [len(x) for x in together.ids] == caps
    assert together.ids == [a.ids[0] for a in alone]
    torch.testing.assert_close(torch.tensor(sum(together.logprobs, [])), torch.tensor(sum((a.logprobs[0] for a in alone), [])),
                               atol=1e-5, rtol=1e-5)
