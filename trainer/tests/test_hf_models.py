"""Tiny random models saved in Hugging Face layout (config.json, model.safetensors, tokenizer files
with the family's real chat template) for two architectures, Qwen3 and Llama, loaded by path as
`training.model` is: one GRPO iteration over tool episodes in the family's tool-call syntax, a
gate step on the trajectories it wrote, the served chat prompt, and an adapter that names its base and the projections
vLLM's --enable-lora takes for these architectures."""
import itertools
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

import trace_trainer.grpo as grpo_mod
from families import family_tokenizer
from trace_trainer.config import GateConfig, GrpoConfig, from_dict
from trace_trainer.env_server import ServedEnv
from trace_trainer.gate import fit_gate
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.sampler import Samples
from trace_trainer.serve import load_policy
from trace_trainer.toy_env import CounterEnv

# vLLM's LoRA layers for LlamaForCausalLM and Qwen3ForCausalLM: the attention and MLP projections
# (packed as qkv_proj and gate_up_proj inside vLLM); embeddings and lm_head are optional extras.
# (Qwen3's q_norm / k_norm are RMSNorms, not linear layers: "all-linear" leaves them out.)
VLLM_LORA_MODULES = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
SIZES = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=4096, tie_word_embeddings=False)
ARCHS = {
    "qwen3": lambda tok: Qwen3Config(vocab_size=len(tok), head_dim=8, **SIZES, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
    "llama3.1": lambda tok: LlamaConfig(vocab_size=len(tok), **SIZES, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                        bos_token_id=tok.bos_token_id),
}


def save_hf_model(path: Path, family: str) -> str:
    tok = family_tokenizer(family)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(ARCHS[family](tok)).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return str(path)


def scripted_first_turn(monkeypatch):
    """Every episode's first turn is a tool call in the family's syntax, add(n) with n = 1, 2, 3
    across each group of 3 (one of which reaches the seeded target: rewards vary, so the update
    runs); later turns are the tiny model's own samples."""
    real = grpo_mod.in_process

    def in_process(model, fmt, temperature):
        sample, turn = real(model, fmt, temperature), itertools.count()

        def generate(prompts, caps, grammar):
            if next(turn):
                return sample(prompts, caps, grammar)
            calls = [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": json.dumps({"n": 1 + i % 3})}}]}
                for i in range(len(prompts))]
            ids = [fmt.encode(fmt.assistant_text(m)) + [fmt.terminator_id] for m in calls]
            return Samples(ids, [[0.0] * len(x) for x in ids])
        return generate
    monkeypatch.setattr(grpo_mod, "in_process", in_process)


@pytest.mark.parametrize("family", sorted(ARCHS))
def test_grpo_and_gate_on_a_hugging_face_directory(family, tmp_path, monkeypatch):
    model_dir = save_hf_model(tmp_path / "model", family)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in Path(model_dir).iterdir()}
    scripted_first_turn(monkeypatch)
    served = ServedEnv(CounterEnv(turns=1))
    try:
        cfg = from_dict(GrpoConfig, {"model": model_dir, "env_url": served.url, "output_uri": str(tmp_path / "out"), "iterations": 1,
                                     "groups": 2, "rollouts_per_group": 3, "max_new_tokens": 6, "max_turns": 3, "checkpoint_every": 1,
                                     "seed": 0, "seed_key": 0, "lr": 1e-3, "constrained_decoding": "auto", "device": "cpu"})
        trainer = GrpoTrainer(cfg)
        assert trainer.fmt.family.name == {"qwen3": "qwen3", "llama3.1": "llama3"}[family] and not trainer.fmt.actions
        done = trainer.run()
    finally:
        served.close()
    m = trainer.metrics[-1]
    assert m["loss"] is not None and m["informative_groups"] > 0, m

    trajs = [json.loads(line) for f in sorted((tmp_path / "out" / "trajectories").glob("*.jsonl")) for line in f.read_text().splitlines()]
    calls = [c for t in trajs for msg in t["messages"] if msg["role"] == "assistant" for c in msg.get("tool_calls") or []]
    # The sampled family-syntax text came back as OpenAI tool calls that reached the env.
    assert sorted(json.loads(c["function"]["arguments"])["n"] for c in calls) == [1, 1, 2, 2, 3, 3]
    assert any(t["success"] for t in trajs) and not all(t["success"] for t in trajs)

    adapter = Path(done["adapter_uri"])
    conf = json.loads((adapter / "adapter_config.json").read_text())
    assert conf["base_model_name_or_path"] == model_dir
    # vLLM checks each target module by its last name part (PEFT writes full paths when a model has
    # fewer than 20 target modules, as here, and the bare names otherwise).
    assert {t.rsplit(".", 1)[-1] for t in conf["target_modules"]} == VLLM_LORA_MODULES, conf["target_modules"]

    gcfg = from_dict(GateConfig, {"model": model_dir, "adapters": [{"name": "a", "uri": str(adapter)}, {"name": "b", "uri": str(adapter)}],
                                  "trajectories": [str(tmp_path / "out" / "trajectories")], "output_uri": str(tmp_path / "gate"),
                                  "steps": 1, "lr": 1e-2, "batch_size": 1, "device": "cpu"})
    out = fit_gate(gcfg)
    assert Path(out["gate_uri"]).exists()

    # Served from the same directory with the trained adapter: the chat prompt is the trainer's.
    policy = load_policy(model_dir, adapter=str(adapter))
    system, user = "use add to reach the target", {"role": "user", "content": "reach 2"}
    answer = policy.complete({"messages": [{"role": "system", "content": system}, user], "tools": CounterEnv().tools(), "max_tokens": 3})
    assert answer["usage"]["prompt_tokens"] == len(trainer.fmt.prompt_ids(system, CounterEnv().tools(), [user]))
