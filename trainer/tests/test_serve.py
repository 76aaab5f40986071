"""The OpenAI-compatible server over real HTTP: base, base + adapter, base + gate; tools."""
import json
import threading
import urllib.request

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from trace_trainer.sampler import Samples
from trace_trainer.serve import load_policy, make_server


def _post(url, body):
    """(status, JSON body, or text: the LoRA endpoints answer plain text as vLLM's do)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, raw, kind = r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        status, raw, kind = e.code, e.read(), e.headers.get("content-type", "")
    return status, json.loads(raw) if kind.startswith("application/json") else raw.decode()


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
    serve_mod.sample = lambda *a, **k: Samples([list(forced)])  # the model is random; the parsing path is what is tested
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


def _ids_of(choice):
    return [int(t[len("token_id:"):]) for t in choice["logprobs"]["tokens"]]


def _greedy(model, prompt, n, eos):
    """Greedy ids and their log-probabilities from a local model: what the server must reproduce."""
    from trace_trainer.grpo import token_logprobs
    from trace_trainer.sampler import sample

    [ids] = sample(model, [prompt], max_new_tokens=n, temperature=0.0, stop_ids={eos}, pad_id=0).ids
    with torch.no_grad():
        lp = token_logprobs(model, [prompt + ids], [[0] * len(prompt) + [1] * len(ids)], 0, 1.0)[0, len(prompt) - 1:]
    return ids, lp.tolist()


def test_runtime_lora_adapters_and_token_id_completions(tool_model_dir, adapter_dir):
    from peft import PeftModel

    policy = load_policy(tool_model_dir, enable_lora=True)
    server, url = _serve(policy)
    try:
        prompt = policy.fmt.prompt_ids("use add", [], [{"role": "user", "content": "reach 3"}])
        eos = policy.tok.eos_token_id
        body = {"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 0, "return_tokens_as_token_ids": True}
        base = AutoModelForCausalLM.from_pretrained(tool_model_dir).eval()
        want_base = _greedy(base, prompt, 6, eos)
        want_adapter = _greedy(PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tool_model_dir), adapter_dir).eval(), prompt, 6, eos)
        assert want_base[0] != want_adapter[0]

        def served(model):
            status, out = _post(url + "/completions", dict(body, model=model))
            assert status == 200, out
            choice = out["choices"][0]
            assert choice["finish_reason"] in ("stop", "length") and out["usage"]["completion_tokens"] == len(_ids_of(choice))
            return _ids_of(choice), choice["logprobs"]["token_logprobs"]

        def assert_matches(got, want):
            assert got[0] == want[0]
            assert got[1] == pytest.approx(want[1], abs=1e-4)

        assert_matches(served("trace-base"), want_base)
        status, text = _post(url + "/load_lora_adapter", {"lora_name": "cap-v1", "lora_path": adapter_dir})
        assert status == 200 and "cap-v1" in text
        with urllib.request.urlopen(url + "/models") as r:
            models = json.loads(r.read())["data"]
        assert [m["id"] for m in models] == ["trace-base", "cap-v1"] and models[1]["parent"] == "trace-base"
        assert_matches(served("cap-v1"), want_adapter)
        assert_matches(served("trace-base"), want_base)  # the base stays the base beside a loaded adapter
        assert _post(url + "/load_lora_adapter", {"lora_name": "cap-v1", "lora_path": adapter_dir})[0] == 400
        assert _post(url + "/unload_lora_adapter", {"lora_name": "cap-v1"})[0] == 200
        status, err = _post(url + "/completions", dict(body, model="cap-v1"))
        assert status == 404 and "cap-v1" in err["error"]["message"]
        assert _post(url + "/unload_lora_adapter", {"lora_name": "cap-v1"})[0] == 404
        assert_matches(served("trace-base"), want_base)

        # Seeded sampling is reproducible; a batch of prompts gets one choice per prompt.
        sampled = dict(body, temperature=1.0, seed=3, max_tokens=8, prompt=[prompt, prompt[:-1]])
        a, b = _post(url + "/completions", sampled)[1], _post(url + "/completions", sampled)[1]
        assert [c["index"] for c in a["choices"]] == [0, 1] and a["choices"] == b["choices"]
        status, err = _post(url + "/completions", dict(body, prompt="reach 3"))
        assert status == 400 and err["error"]["message"].startswith("prompt:")
        status, err = _post(url + "/completions", dict(body, top_p=0.9))
        assert status == 400 and err["error"]["message"].startswith("top_p:")
    finally:
        server.shutdown()


def test_runtime_lora_needs_enable_lora(tool_model_dir, adapter_dir):
    server, url = _serve(load_policy(tool_model_dir))
    try:
        status, err = _post(url + "/load_lora_adapter", {"lora_name": "x", "lora_path": adapter_dir})
    finally:
        server.shutdown()
    assert status == 400 and "--enable-lora" in err["error"]["message"]
    with pytest.raises(ValueError, match="--enable-lora"):
        load_policy(tool_model_dir, adapter=adapter_dir, enable_lora=True)


def test_chat_requests_in_flight_together_decode_as_one_batch_with_their_own_answers(tool_model_dir):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    bodies = [{"messages": [{"role": "system", "content": "use add"}, {"role": "user", "content": "reach " + "3 " * i}],
               "tools": tools, "temperature": 0, "max_tokens": 3 + 2 * i} for i in range(4)]
    alone_policy = load_policy(tool_model_dir)
    alone_policy.batcher.window_s = 0
    alone = [alone_policy.complete(b) for b in bodies]
    assert alone_policy.batcher.sizes == [1, 1, 1, 1]

    policy = load_policy(tool_model_dir)
    # The batch waits until all four requests are queued (no timing involved: max_batch is reached).
    policy.batcher.window_s, policy.batcher.max_batch = 600, 4
    server, url = _serve(policy)
    replies = [None] * 4
    try:
        threads = [threading.Thread(target=lambda i=i: replies.__setitem__(i, _post(url + "/chat/completions", bodies[i]))) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.shutdown()
    assert policy.batcher.sizes == [4]
    for (status, out), ref in zip(replies, alone):
        assert status == 200, out
        got, want = out["choices"][0]["message"], ref["choices"][0]["message"]
        assert got["content"] == want["content"] and out["usage"] == ref["usage"]
        # Call ids number requests in the order they ran; the calls themselves must match.
        assert [c["function"] for c in got.get("tool_calls", [])] == [c["function"] for c in want.get("tool_calls", [])]
    assert len({out["usage"]["completion_tokens"] for _, out in replies}) > 1  # each row kept its own max_tokens
