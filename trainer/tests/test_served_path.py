"""The served path applies what was trained: base, base + adapter and base + gate answer the same
prompt differently once the adapters are non-zero, and identically when every LoRA B is 0."""
import json
import threading
import urllib.request

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from trace_trainer.config import GateConfig, from_dict
from trace_trainer.gate import fit_gate
from trace_trainer.serve import load_policy, make_server
from trace_trainer.storage import Store


def _adapter(model_dir, path, scale: float, seed: int) -> str:
    torch.manual_seed(seed)
    m = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 1.0).mul_(scale)  # scale 0: B = 0, the adapter adds nothing
    m.save_pretrained(str(path))
    return str(path)


def _gate(model_dir, tok, adapters, tmp_path, name) -> str:
    data = tmp_path / f"{name}.jsonl"
    traj = {"id": "t", "env": "toy", "taskId": "t", "trial": 0, "model": "m", "reward": 1.0, "success": True, "termination": "agent_stop",
            "messages": [{"role": "system", "content": "use add"}, {"role": "user", "content": "reach 3"}, {"role": "assistant", "content": "ok"}]}
    data.write_text(json.dumps(traj) + "\n")
    cfg = from_dict(GateConfig, {"model": model_dir, "adapters": [{"name": f"a{i}", "uri": a} for i, a in enumerate(adapters)],
                                 "trajectories": [str(data)], "output_uri": str(tmp_path / name), "steps": 2, "lr": 5e-2, "batch_size": 1})
    return fit_gate(cfg, model=AutoModelForCausalLM.from_pretrained(model_dir), tokenizer=tok, store=Store())["gate_uri"]


def _greedy(policy, prompt) -> list[int]:
    server = make_server(policy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "logprobs": 0, "return_tokens_as_token_ids": True}
        req = urllib.request.Request(f"http://127.0.0.1:{server.server_address[1]}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req) as r:
            out = json.loads(r.read())
    finally:
        server.shutdown()
    return [int(t.split(":")[1]) for t in out["choices"][0]["logprobs"]["tokens"]]


def test_served_variants_apply_their_weights(tool_model_dir, tool_tok, tmp_path):
    prompt = tool_tok.encode("<|im_start|>user\nreach 3<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    zero = [_adapter(tool_model_dir, tmp_path / f"zero{i}", 0.0, i) for i in range(2)]
    live = [_adapter(tool_model_dir, tmp_path / f"live{i}", 1.0, 10 + i) for i in range(2)]
    base = _greedy(load_policy(tool_model_dir), prompt)
    assert _greedy(load_policy(tool_model_dir, adapter=zero[0]), prompt) == base
    assert _greedy(load_policy(tool_model_dir, gate=_gate(tool_model_dir, tool_tok, zero, tmp_path, "gate-zero")), prompt) == base
    with_adapter = _greedy(load_policy(tool_model_dir, adapter=live[0]), prompt)
    with_gate = _greedy(load_policy(tool_model_dir, gate=_gate(tool_model_dir, tool_tok, live, tmp_path, "gate-live")), prompt)
    assert with_adapter != base and with_gate != base
