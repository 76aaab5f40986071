"""LoRA-MoE gate: routing, load-balance loss, equivalence with single adapters, training, save/load."""
import copy
import json

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from trace_trainer.config import GateConfig, from_dict
from trace_trainer.gate import fit_gate, gate_losses, routing_on
from trace_trainer.moe import attach_moe, load_balance_loss, load_gate, read_adapter, set_top1
from trace_trainer.storage import Store
from trace_trainer.tiny import build_model


def _make_adapter(base, path, seed):
    torch.manual_seed(seed)
    peft = get_peft_model(copy.deepcopy(base), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # large enough that adapters change the logits visibly
    peft.save_pretrained(str(path))
    return str(path)


@pytest.fixture()
def two_adapters(tool_tok, tmp_path):
    base = build_model(len(tool_tok), pad_id=tool_tok.pad_token_id, eos_id=tool_tok.eos_token_id)
    return base, [_make_adapter(base, tmp_path / f"a{i}", 10 + i) for i in range(2)]


def _ids(tok):
    return torch.tensor([tok.encode("<|im_start|>user\nreach 3<|im_end|>\n<|im_start|>assistant\nok", add_special_tokens=False)])


def test_one_hot_gate_equals_each_single_adapter(two_adapters, tool_tok):
    base, dirs = two_adapters
    ids = _ids(tool_tok)
    for c, d in enumerate(dirs):
        single = PeftModel.from_pretrained(copy.deepcopy(base), d).eval()
        moe = copy.deepcopy(base)
        layers = attach_moe(moe, [read_adapter(x)[0] for x in dirs])
        for layer in layers.values():
            with torch.no_grad():
                layer.gate.bias[c] = 1.0  # top-1 picks c for every token
        set_top1(layers, True)
        with torch.no_grad():
            want, got = single(input_ids=ids).logits, moe(input_ids=ids).logits
            plain = base(input_ids=ids).logits
        assert (want - plain).abs().max() > 1e-2, "the adapter must change the logits for the test to mean anything"
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_zero_init_gate_routes_uniformly_and_lb_loss_is_lambda(two_adapters, tool_tok):
    base, dirs = two_adapters
    layers = attach_moe(base, [read_adapter(x)[0] for x in dirs])
    ids = _ids(tool_tok)
    base(input_ids=ids)
    for layer in layers.values():
        torch.testing.assert_close(layer.last_probs, torch.full_like(layer.last_probs, 0.5))
    lb = load_balance_loss(layers, torch.ones_like(ids), 0.05)
    assert float(lb.detach()) == pytest.approx(0.05, abs=1e-7)


def test_soft_uniform_routing_is_the_average_adapter_delta(two_adapters):
    base, dirs = two_adapters
    attach_moe(base, [read_adapter(x)[0] for x in dirs])
    name = "model.layers.0.self_attn.q_proj"
    layer = base.get_submodule(name)
    h = torch.randn(3, layer.base.in_features)
    with torch.no_grad():
        deltas = [h @ A.T @ B.T for A, B in (read_adapter(d)[0][name] for d in dirs)]
        torch.testing.assert_close(layer(h), layer.base(h) + 0.5 * (deltas[0] + deltas[1]), atol=1e-5, rtol=1e-5)


def test_only_gates_get_gradients(two_adapters, tool_tok):
    base, dirs = two_adapters
    frozen = {n: p.detach().clone() for n, p in base.named_parameters()}
    layers = attach_moe(base, [read_adapter(x)[0] for x in dirs])
    ids, mask = _ids(tool_tok)[0].tolist(), [0] * 10 + [1] * (len(_ids(tool_tok)[0]) - 10)
    ce, lb = gate_losses(base, layers, [(ids, mask)], tool_tok.pad_token_id, 0.05)
    (ce + lb).backward()
    grads = {n for n, p in base.named_parameters() if p.grad is not None}
    assert grads and all(".gate." in n for n in grads)
    assert len(grads) == 2 * len(layers)
    for n, p in base.named_parameters():
        if ".gate." not in n:
            key = n.replace(".base.", ".")
            assert torch.equal(p, frozen[key]), n


def _trajectory(target):
    call = {"id": "c0", "type": "function", "function": {"name": "add", "arguments": json.dumps({"n": target})}}
    return {"id": f"t{target}", "env": "toy-counter", "taskId": "x", "trial": 0, "model": "m", "reward": 1.0, "success": True,
            "rewardInfo": {"reward": 1.0, "components": {}, "success": True}, "termination": "user_stop",
            "usage": {"promptTokens": 0, "completionTokens": 0, "calls": 1}, "steps": 2, "durationMs": 0,
            "messages": [{"role": "system", "content": "use add to reach the target"}, {"role": "user", "content": f"reach {target}"},
                         {"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "c0", "content": str(target)},
                         {"role": "assistant", "content": "ok"}]}


def test_fit_gate_lowers_ce_and_saves_a_loadable_gate(two_adapters, tool_tok, tmp_path, monkeypatch):
    import trace_trainer.gate as gate_mod

    monkeypatch.setattr(gate_mod, "ROUTING_EXAMPLES", 3)
    base, dirs = two_adapters
    data = tmp_path / "traj.jsonl"
    data.write_text("\n".join(json.dumps(_trajectory(t)) for t in (1, 2, 3)) + "\n")
    failed = dict(_trajectory(1), success=False, id="f")
    gold = dict(_trajectory(4), id="gold-4", source="gold")
    with data.open("a") as f:
        f.write(json.dumps(failed) + "\n" + json.dumps(gold) + "\n")
    cfg = from_dict(GateConfig, {"model": "unused", "adapters": [{"name": "a", "uri": dirs[0]}, {"name": "b", "uri": dirs[1]}],
                                 "trajectories": [str(data)], "output_uri": str(tmp_path / "out"), "steps": 30, "lr": 5e-2, "batch_size": 3})
    result = fit_gate(cfg, model=copy.deepcopy(base), tokenizer=tool_tok, store=Store())
    manifest = json.loads((tmp_path / "out/gate/gate_manifest.json").read_text())
    assert manifest["examples"] == 4, "failed trajectories are not gate data"
    assert manifest["examples_by_source"] == {"policy": 3, "gold": 1} == result["examples"]
    assert set(result["routing"]) == {"a", "b"} and sum(result["routing"].values()) == pytest.approx(1.0, abs=1e-3)
    assert manifest["routing_share"] == result["routing"]
    assert manifest["routing_examples"] == 3, "routing is measured on a sample of at most ROUTING_EXAMPLES"
    assert [a["name"] for a in manifest["adapters"]] == ["a", "b"] and all(len(a["sha256"]) == 64 for a in manifest["adapters"])
    h = manifest["history"]
    assert h[-1]["ce"] < h[0]["ce"] - 0.05, (h[0], h[-1])
    assert result["gates"]["uri"].endswith("gates.safetensors")
    loaded = copy.deepcopy(base)
    layers = load_gate(loaded, Store(), result["gate_uri"])
    assert all(layer.top1 for layer in layers.values())
    assert any(float(layer.gate.weight.abs().sum()) > 0 for layer in layers.values())


def test_routing_share_counts_top1_assistant_tokens(two_adapters, tool_tok):
    base, dirs = two_adapters
    layers = attach_moe(base, [read_adapter(x)[0] for x in dirs])
    ids = _ids(tool_tok)[0].tolist()
    example = (ids, [0] * 10 + [1] * (len(ids) - 10), "policy")
    for layer in layers.values():
        with torch.no_grad():
            layer.gate.bias[1] = 1.0
    assert routing_on(base, layers, [example], tool_tok.pad_token_id, 2) == [0.0, 1.0]
    assert not any(layer.top1 for layer in layers.values()), "routing_on restores soft routing for training"


def _grads(layers):
    return [p.grad.clone() for layer in layers.values() for p in layer.gate.parameters()]


def test_balance_gradient_inside_the_layers_equals_the_loss_formula_with_and_without_checkpointing(two_adapters, tool_tok):
    base, dirs = two_adapters
    layers = attach_moe(base, [read_adapter(x)[0] for x in dirs])
    torch.manual_seed(3)
    for layer in layers.values():
        with torch.no_grad():
            layer.gate.weight.normal_(0, 0.5)  # uneven routing, so f and P are not trivial
    ids = _ids(tool_tok)[0].tolist()
    batch = [(ids, [0] * 10 + [1] * (len(ids) - 10))]
    pad = tool_tok.pad_token_id
    base.train()
    # The formula: CE + λ·C·Σ f_c P_c over layers, built after the forward pass.
    ce, _ = gate_losses(base, layers, batch, pad, 0.0)
    want_lb = load_balance_loss(layers, torch.ones(1, len(ids)), 0.5)
    (ce + want_lb).backward()
    want = _grads(layers)
    base.zero_grad(set_to_none=True)
    ce2, lb = gate_losses(base, layers, batch, pad, 0.5)
    ce2.backward()
    assert float(lb) == pytest.approx(float(want_lb.detach()), rel=1e-6) and not lb.requires_grad
    for g, w in zip(_grads(layers), want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-5)
    assert any(float((g - w0).abs().max()) > 1e-4 for g, w0 in zip(want, _grads_without_balance(base, layers, batch, pad))), \
        "the balance term must change the gradients for this comparison to mean anything"
    # Recomputed per layer (reentrant checkpointing): the same gradients.
    base.zero_grad(set_to_none=True)
    base.config.use_cache = False
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    base.enable_input_require_grads()
    ce3, _ = gate_losses(base, layers, batch, pad, 0.5)
    ce3.backward()
    for g, w in zip(_grads(layers), want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-5)


def _grads_without_balance(base, layers, batch, pad):
    base.zero_grad(set_to_none=True)
    ce, _ = gate_losses(base, layers, batch, pad, 0.0)
    ce.backward()
    return _grads(layers)
