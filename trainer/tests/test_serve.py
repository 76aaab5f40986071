"""The OpenAI-compatible server over real HTTP: base, base + adapter, base + gate; tools."""
import json
import threading
import urllib.request

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from trace_trainer.serve import load_policy, make_server


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture()
def adapter_dir(tool_model_dir, tmp_path):
    torch.manual_seed(5)
    m = get_peft_model(AutoModelForCausalLM.from_pretrained(tool_model_dir), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 1.0)
    m.save_pretrained(str(tmp_path / "adapter"))
    return str(tmp_path / "adapter")


def _serve(policy):
    server = make_server(policy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_serves_base_and_adapter_variants_with_tools(tool_model_dir, adapter_dir):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    body = {"model": "x", "messages": [{"role": "system", "content": "use add"}, {"role": "user", "content": "reach 3"}],
            "tools": tools, "temperature": 0, "max_tokens": 8}
    replies = {}
    for variant, kw in (("base", {}), ("adapter", {"adapter": adapter_dir})):
        policy = load_policy(tool_model_dir, **kw)
        server, url = _serve(policy)
        try:
            with urllib.request.urlopen(url + "/models") as r:
                assert json.loads(r.read())["data"][0]["id"] == f"trace-{variant}"
            status, out = _post(url + "/chat/completions", body)
            assert status == 200, out
            choice = out["choices"][0]
            assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length", "tool_calls")
            assert out["usage"]["completion_tokens"] >= 1
            replies[variant] = out["usage"]["completion_tokens"], choice["message"]["content"]
            status, err = _post(url + "/chat/completions", {"messages": []})
            assert status == 400 and "messages" in err["error"]["message"]
        finally:
            server.shutdown()
    assert replies["base"] != replies["adapter"], "greedy output must differ once a non-zero adapter is applied"


def test_a_tool_call_in_the_output_is_returned_as_tool_calls(tool_model_dir):
    policy = load_policy(tool_model_dir)
    call = '<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>'
    forced = policy.fmt.encode(call) + [policy.fmt.stop_ids[0]]
    import trace_trainer.serve as serve_mod

    original = serve_mod.sample
    serve_mod.sample = lambda *a, **k: [list(forced)]  # the model is random; the parsing path is what is tested
    try:
        server, url = _serve(policy)
        status, out = _post(url + "/chat/completions", {"messages": [{"role": "user", "content": "reach 2"}],
                                                         "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}]})
        server.shutdown()
    finally:
        serve_mod.sample = original
    assert status == 200
    msg = out["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"n": 2}'}
