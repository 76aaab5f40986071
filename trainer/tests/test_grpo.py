"""GRPO core: advantages, the clipped surrogate, LoRA-only gradients, accumulation, PEFT save/load."""
import copy

import numpy as np
import pytest
import torch
from peft import PeftModel

from trace_trainer.config import LoraConfig
from trace_trainer.grpo import accumulate_gradients, group_advantages, surrogate_sum, token_logprobs
from trace_trainer.model import add_lora, trainable_parameters
from trace_trainer.rollout import Rollout


def test_group_advantages():
    a = group_advantages([1.0, 0.0, 0.0, 1.0], eps=0.0)
    assert a == pytest.approx([1.0, -1.0, -1.0, 1.0])
    a = group_advantages([1.0, 0.0, 0.0, 0.0], eps=1e-6)
    assert sum(a) == pytest.approx(0.0, abs=1e-9) and a[0] > 0 > a[1]
    assert group_advantages([0.3, 0.3, 0.3], eps=1e-6) is None
    # Huge finite rewards standardize as small ones do (the mean of 1e308s overflowed to NaN advantages).
    assert np.allclose(group_advantages([1e308, 1e308, 0.0, 0.0], eps=1e-6), group_advantages([1.0, 1.0, 0.0, 0.0], eps=1e-6))
    with pytest.raises(ValueError, match="finite"):
        group_advantages([float("nan"), 0.0], eps=1e-6)


def test_surrogate_clips_only_beyond_the_asymmetric_range():
    logp = torch.tensor([[0.0, 0.0, 0.0]], requires_grad=True)
    old = torch.log(torch.tensor([[1.0, 1 / 1.5, 1 / 0.7]]))  # ratios 1, 1.5, 0.7
    mask = torch.ones(1, 3)
    surrogate_sum(logp, old, torch.tensor([1.0]), mask, 0.2, 0.28).backward()
    g = logp.grad[0]
    assert g[0] == pytest.approx(-1.0)  # inside the range: −ρA gradient
    assert g[1] == 0.0  # ρ = 1.5 > 1.28 with A > 0: clipped, no gradient
    assert g[2] == pytest.approx(-0.7)  # ρ = 0.7 < 0.8 with A > 0: min picks the unclipped term
    logp.grad = None
    surrogate_sum(logp, old, torch.tensor([-1.0]), mask, 0.2, 0.28).backward()
    assert logp.grad[0][2] == 0.0  # A < 0 and ρ below 1 − 0.2: clipped


def _rollouts(tok, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        prompt = torch.randint(4, len(tok), (5 + i,), generator=g).tolist()
        sampled = torch.randint(4, len(tok), (3 + 2 * i,), generator=g).tolist()
        obs = torch.randint(4, len(tok), (2,), generator=g).tolist()
        more = torch.randint(4, len(tok), (2,), generator=g).tolist()
        ids = prompt + sampled + obs + more
        mask = [0] * len(prompt) + [1] * len(sampled) + [0] * len(obs) + [1] * len(more)
        out.append(Rollout(group=0, seed=i, task_id="t", ids=ids, mask=mask, messages=[], sampled_tokens=sum(mask)))
    return out


def _lora(tool_model):
    return add_lora(tool_model, LoraConfig(r=4, alpha=4))


def _live_lora(tool_model):
    """A LoRA whose B ≠ 0, so the adapter changes the outputs and A gets gradients too."""
    model = _lora(tool_model)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    return model


def test_b_zero_gives_base_outputs(tool_model, tool_tok):
    ids = torch.tensor([_rollouts(tool_tok)[0].ids])
    with torch.no_grad():
        base = tool_model(input_ids=ids).logits.clone()
        lora = _lora(tool_model)
        assert torch.equal(lora(input_ids=ids).logits, base)


def test_only_lora_gets_gradients_and_base_is_unchanged(tool_model, tool_tok):
    model = _lora(tool_model)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    rs = _rollouts(tool_tok)
    opt = torch.optim.AdamW(trainable_parameters(model), lr=1e-2)
    for _ in range(2):  # two steps: after the first, B ≠ 0 so A gets gradients too
        opt.zero_grad()
        accumulate_gradients(model, rs, [1.0, -1.0, 0.5, -0.5], pad=tool_tok.pad_token_id, micro_batch_size=4, clip_low=0.2, clip_high=0.28)
        with_grad = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
        opt.step()
    assert with_grad and all("lora_A" in n or "lora_B" in n for n in with_grad)
    assert any("lora_A" in n for n in with_grad) and any("lora_B" in n for n in with_grad)
    assert any("mlp" in n for n in with_grad) and any("self_attn" in n for n in with_grad)
    for n, p in model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, before[n]), n


def test_gradient_accumulation_split_equals_one_batch(tool_model, tool_tok):
    model = _live_lora(tool_model)
    rs, adv = _rollouts(tool_tok), [1.0, -1.0, 0.5, -0.5]
    grads = []
    for micro in (4, 1, 3):
        model.zero_grad()
        loss = accumulate_gradients(model, rs, adv, pad=tool_tok.pad_token_id, micro_batch_size=micro, clip_low=0.2, clip_high=0.28)
        grads.append(([p.grad.clone() for p in trainable_parameters(model)], loss))
    for other, loss in grads[1:]:
        assert loss == pytest.approx(grads[0][1], abs=1e-6)
        for a, b in zip(grads[0][0], other):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_loss_covers_only_masked_tokens(tool_model, tool_tok):
    model = _lora(tool_model)
    r = _rollouts(tool_tok, n=1)[0]
    with torch.no_grad():
        logp = token_logprobs(model, [r.ids], [r.mask], tool_tok.pad_token_id, 1.0)
    assert logp.shape == (1, len(r.ids) - 1)
    # Changing a token outside the mask that comes after every sampled token leaves the loss unchanged.
    model.zero_grad()
    a = accumulate_gradients(model, [r], [1.0], pad=tool_tok.pad_token_id, micro_batch_size=1, clip_low=0.2, clip_high=0.28)
    r2 = copy.deepcopy(r)
    r2.ids.append(5)
    r2.mask.append(0)
    b = accumulate_gradients(model, [r2], [1.0], pad=tool_tok.pad_token_id, micro_batch_size=1, clip_low=0.2, clip_high=0.28)
    assert a == pytest.approx(b, abs=1e-7)
    assert a == pytest.approx(-1.0, abs=1e-6)  # ratio 1, A = 1: −Σ 1 / n_tokens


def test_saved_adapter_loads_with_plain_peft_and_gives_identical_logits(tool_tok, tmp_path):
    from trace_trainer.tiny import build_model

    def fresh():
        return build_model(len(tool_tok), pad_id=tool_tok.pad_token_id, eos_id=tool_tok.eos_token_id)

    model = add_lora(fresh(), LoraConfig(r=4, alpha=8))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    model.save_pretrained(str(tmp_path / "adapter"))
    assert {p.name for p in (tmp_path / "adapter").iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    ids = torch.tensor([_rollouts(tool_tok)[1].ids])
    loaded = PeftModel.from_pretrained(fresh(), str(tmp_path / "adapter"))
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, loaded(input_ids=ids).logits)


def test_logprobs_are_those_of_the_tempered_distribution_and_only_at_scored_positions(tool_model, tool_tok):
    r = _rollouts(tool_tok, n=1)[0]
    ids = torch.tensor([r.ids])
    with torch.no_grad():
        full = tool_model(input_ids=ids).logits[0, :-1].float()
        for t in (0.5, 1.0, 1.7):
            want = torch.log_softmax(full / t, dim=-1).gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
            got = token_logprobs(tool_model, [r.ids], [r.mask], tool_tok.pad_token_id, t)[0]
            scored = torch.tensor(r.mask[1:], dtype=torch.bool)
            torch.testing.assert_close(got[scored], want[scored], atol=1e-5, rtol=1e-5)
            assert torch.all(got[~scored] == 0)


def test_sampler_and_update_agree_at_temperature_below_one(tool_model, tool_tok):
    from trace_trainer.sampler import sample

    prompt = _rollouts(tool_tok, n=1)[0].ids[:6]
    torch.manual_seed(0)
    out = sample(tool_model, [prompt, prompt[:4]], max_new_tokens=[8, 5], temperature=0.6, stop_ids={tool_tok.eos_token_id},
                 pad_id=tool_tok.pad_token_id)
    assert len(out.ids[0]) <= 8 and len(out.ids[1]) <= 5
    for p, s, lps in zip([prompt, prompt[:4]], out.ids, out.logprobs):
        with torch.no_grad():
            lp = token_logprobs(tool_model, [p + s], [[0] * len(p) + [1] * len(s)], tool_tok.pad_token_id, 0.6)[0, len(p) - 1:]
        assert lp.tolist() == pytest.approx(lps, abs=1e-5)


def test_training_temperature_must_be_positive():
    from trace_trainer.config import GrpoConfig, from_dict
    from trace_trainer.events import ConfigError

    with pytest.raises(ConfigError, match=r"config\.temperature: must be > 0"):
        from_dict(GrpoConfig, {"model": "m", "env_url": "http://x", "output_uri": "/tmp/o", "temperature": 0})


def test_a_shared_prefix_computed_once_gives_the_same_logprobs_and_gradients(tool_model, tool_tok):
    """Rollouts of a group share their prompt: computing it once must change nothing."""
    from trace_trainer import grpo

    model = _live_lora(tool_model)
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(4, len(tool_tok), (30,), generator=g).tolist()
    rs = []
    for i in range(3):
        sampled = torch.randint(4, len(tool_tok), (4 + 3 * i,), generator=g).tolist()
        rs.append(Rollout(group=0, seed=0, task_id="t", ids=prompt + sampled, mask=[0] * len(prompt) + [1] * len(sampled), messages=[],
                          sampled_tokens=len(sampled)))
    results = []
    for min_shared in (10**9, 16):  # off, then on
        grpo.MIN_SHARED_PREFIX = min_shared
        try:
            model.zero_grad()
            lp = token_logprobs(model, [r.ids for r in rs], [r.mask for r in rs], tool_tok.pad_token_id, 1.0)
            accumulate_gradients(model, rs, [1.0, -0.5, 0.25], pad=tool_tok.pad_token_id, micro_batch_size=3, clip_low=0.2, clip_high=0.28)
            results.append((lp.detach(), [p.grad.clone() for p in trainable_parameters(model)]))
        finally:
            grpo.MIN_SHARED_PREFIX = 16
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-5)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_truncated_importance_sampling_weights_each_token_by_the_capped_ratio(tool_model, tool_tok):
    """With the sampler's log-probs ln 4 below the trainer's, every weight is capped at 2: the
    gradient doubles; ln 2 above, the weight is 1/2. The gap metric is that mean |difference|;
    a rollout without the sampler's log-probs keeps weight 1."""
    import math

    model = _live_lora(tool_model)
    rs, adv = _rollouts(tool_tok), [1.0, -1.0, 0.5, -0.5]
    with torch.no_grad():
        own = [token_logprobs(model, [r.ids], [r.mask], tool_tok.pad_token_id, 1.0)[0][torch.tensor(r.mask[1:], dtype=torch.bool)]
               for r in rs]

    def grads(sampler, stats=None):
        model.zero_grad()
        accumulate_gradients(model, rs, adv, pad=tool_tok.pad_token_id, micro_batch_size=3, clip_low=0.2, clip_high=0.28,
                             sampler_logps=sampler, tis_cap=2.0, stats=stats)
        return [p.grad.clone() for p in trainable_parameters(model)]

    plain = grads(None)
    for shift, factor in ((-math.log(4), 2.0), (math.log(2), 0.5)):
        stats = {}
        got = grads([o + shift for o in own], stats)
        for a, b in zip(got, plain):
            torch.testing.assert_close(a, factor * b, atol=1e-6, rtol=1e-4)
        assert stats["gap_n"] == sum(sum(r.mask) for r in rs) and stats["gap_sum"] / stats["gap_n"] == pytest.approx(abs(shift), abs=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(grads([None] * len(rs)), plain))
