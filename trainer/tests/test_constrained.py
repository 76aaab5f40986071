"""Constrained decoding: every sampled turn is a valid JSON action ending on the template's turn
terminator, and training scores exactly the distribution the sampler drew from."""
import json
import threading
import urllib.request

import pytest
import torch

from trace_trainer.chat import ChatFormat
from trace_trainer.envclient import EnvClient
from trace_trainer.env_server import ServedEnv
from trace_trainer.grammar import WHITESPACE_BIAS, ActionGrammar, action_schema, parse_action
from trace_trainer.grpo import token_logprobs
from trace_trainer.model import load_base, pick_device
from trace_trainer.rollout import collect
from trace_trainer.sampler import in_process, sample
from trace_trainer.serve import load_policy, make_server
from trace_trainer.toy_env import CounterEnv

from conftest import SMOLLM2_GGUF

TOOLS = CounterEnv().tools()


def _grammar(tok, fmt, model):
    return ActionGrammar(tok, action_schema(TOOLS), fmt.terminator_id, model.config.vocab_size)


def test_random_model_under_the_grammar_only_writes_valid_actions(smol_tok, smol_vocab_model):
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    prompt = fmt.prompt_ids("use add to reach the target", TOOLS, [{"role": "user", "content": "reach 2"}])
    torch.manual_seed(0)
    out = sample(smol_vocab_model, [prompt] * 6, max_new_tokens=200, temperature=1.0, stop_ids=fmt.stop_ids,
                 pad_id=smol_tok.pad_token_id, grammar=grammar)
    complete = 0
    for ids in out.ids:
        text, ended = fmt.decode_sample(ids)
        if not ended:  # cut at max_new_tokens inside a long message string
            continue
        complete += 1
        assert ids[-1] == fmt.terminator_id == smol_tok.convert_tokens_to_ids("<|im_end|>")
        action = json.loads(text)
        assert action["type"] in ("message", "tool_call")
        if action["type"] == "tool_call":
            assert action["name"] == "add" and isinstance(action["arguments"]["n"], int) and set(action["arguments"]) == {"n"}
            _, calls = parse_action(text, "c")
            assert json.loads(calls[0]["function"]["arguments"]) == action["arguments"]
    assert complete >= 3, "a random model under the grammar must finish most actions within 200 tokens"


def test_training_logprobs_equal_the_samplers_under_mask_and_temperature(smol_tok, smol_vocab_model):
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    served = ServedEnv(CounterEnv(turns=2))
    try:
        env = EnvClient(served.url)
        torch.manual_seed(3)
        rollouts = collect(in_process(smol_vocab_model, fmt, 0.7), fmt, env, env.info(), [{"seed": 1}], rollouts_per_start=3,
                           max_new_tokens=40, max_turns=3, max_errors=4, max_seq_len=1024, grammar=grammar)
    finally:
        served.close()
    for r in rollouts:
        allowed = torch.cat([grammar.allowed(s) for s in r.samples])
        with torch.no_grad():
            lp = token_logprobs(smol_vocab_model, [r.ids], [r.mask], smol_tok.pad_token_id, 0.7, [allowed], grammar)[0]
        scored = [lp[t - 1].item() for t, m in enumerate(r.mask) if m]
        assert scored == pytest.approx(r.sample_logprobs, abs=1e-5)
        # Tokens the grammar forces (JSON scaffolding, the terminator) carry probability 1.
        forced = [i for i, a in enumerate(allowed) if int(a.sum()) == 1]
        assert forced and all(abs(scored[i]) < 1e-6 for i in forced)


def test_without_the_mask_the_update_would_score_another_policy(smol_tok, smol_vocab_model):
    """The replayed mask matters: unmasked log-probs of the same tokens are strictly lower."""
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    prompt = fmt.prompt_ids("use add to reach the target", TOOLS, [{"role": "user", "content": "reach 2"}])
    torch.manual_seed(1)
    out = sample(smol_vocab_model, [prompt], max_new_tokens=30, temperature=1.0, stop_ids=fmt.stop_ids,
                 pad_id=smol_tok.pad_token_id, grammar=grammar)
    ids, mask = prompt + out.ids[0], [0] * len(prompt) + [1] * len(out.ids[0])
    with torch.no_grad():
        masked = token_logprobs(smol_vocab_model, [ids], [mask], smol_tok.pad_token_id, 1.0, [grammar.allowed(out.ids[0])], grammar).sum()
        plain = token_logprobs(smol_vocab_model, [ids], [mask], smol_tok.pad_token_id, 1.0).sum()
    assert float(masked) == pytest.approx(sum(out.logprobs[0]), abs=1e-4)
    assert float(plain) < float(masked) - 1.0


def test_a_token_outside_the_grammar_is_refused_on_replay(smol_tok, smol_vocab_model):
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    with pytest.raises(ValueError, match="not allowed by the action grammar"):
        grammar.allowed(smol_tok.encode("hello", add_special_tokens=False))


def test_action_prompt_matches_the_embedded_servers_format(smol_tok):
    fmt = ChatFormat(smol_tok, actions=True)
    call = {"id": "call_0_0", "type": "function", "function": {"name": "add", "arguments": '{"n": 2}'}}
    text = smol_tok.decode(fmt.prompt_ids("sys", TOOLS, [{"role": "user", "content": "reach 2"},
                                                         {"role": "assistant", "content": None, "tool_calls": [call]},
                                                         {"role": "tool", "tool_call_id": "call_0_0", "content": "2"}]))
    assert '{"type": "tool_call", "name": "add", "arguments": {"n": 2}}' in text
    assert "Result of tool call add (call_0_0):\n2" in text
    assert 'To call a tool: {"type": "tool_call", "name": <tool name>, "arguments": {<arguments>}}' in text
    # A turn appended after a sampled call names the tool, as a full render does.
    cont = smol_tok.decode(fmt.continuation_ids([{"role": "tool", "tool_call_id": "call_0_0", "content": "2"}], True, after={"tool_calls": [call]}))
    assert "Result of tool call add (call_0_0):\n2" in cont


def test_tool_parameters_with_local_refs_compile(smol_tok, smol_vocab_model):
    """τ²-style tools define shared shapes under $defs; their refs must resolve under the action schema."""
    tools = [{"type": "function", "function": {"name": "update", "parameters": {
        "type": "object", "properties": {"passengers": {"type": "array", "items": {"$ref": "#/$defs/Passenger"}}},
        "required": ["passengers"], "$defs": {"Passenger": {"type": "object", "properties": {"first_name": {"type": "string"}},
                                                           "required": ["first_name"]}}}}}]
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = ActionGrammar(smol_tok, action_schema(tools), fmt.terminator_id, smol_vocab_model.config.vocab_size)
    text = '{"type": "tool_call", "name": "update", "arguments": {"passengers": [{"first_name": "Ana"}]}}'
    grammar.allowed(smol_tok.encode(text, add_special_tokens=False) + [fmt.terminator_id])
    with pytest.raises(ValueError, match="not allowed"):
        grammar.allowed(smol_tok.encode('{"type": "tool_call", "name": "update", "arguments": {"passengers": [{"x": 1}]}}',
                                        add_special_tokens=False))


def test_a_vocabulary_that_cannot_spell_json_is_a_clear_error(tool_tok, tool_model):
    fmt = ChatFormat(tool_tok, actions=True)
    grammar = ActionGrammar(tool_tok, action_schema(TOOLS), fmt.terminator_id, tool_model.config.vocab_size)
    prompt = fmt.encode("reach 2")
    with pytest.raises(ValueError, match="constrainedDecoding to false"):
        sample(tool_model, [prompt], max_new_tokens=30, temperature=1.0, stop_ids=fmt.stop_ids, pad_id=tool_tok.pad_token_id, grammar=grammar)


def test_the_grammar_admits_the_whitespace_the_embedded_servers_grammar_admits(smol_tok, smol_vocab_model):
    """JSON with or without blanks around its separators, as node-llama-cpp's JSON grammar admits it."""
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    for text in ('{"type": "tool_call", "name": "add", "arguments": {"n": 2}}',
                 '{ "type": "tool_call", "name": "add", "arguments": { "n": 2 } }',
                 '{\n  "type": "message",\n  "content": "done"\n}'):
        grammar.allowed(smol_tok.encode(text, add_special_tokens=False) + [fmt.terminator_id])


def test_whitespace_only_tokens_carry_the_embedded_servers_bias(smol_tok, smol_vocab_model):
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = _grammar(smol_tok, fmt, smol_vocab_model)
    ws = {t for t in range(len(smol_tok)) if smol_tok.decode([t]) and not smol_tok.decode([t]).strip()}
    assert {smol_tok.convert_tokens_to_ids(t) for t in ("Ġ", "Ċ")} <= ws
    assert set(grammar.bias.nonzero(as_tuple=True)[0].tolist()) == ws
    assert set(grammar.bias[list(ws)].tolist()) == {WHITESPACE_BIAS}
    assert {int(k) for k in grammar.logit_bias()} == ws
    plain = ActionGrammar(smol_tok, action_schema(TOOLS), fmt.terminator_id, smol_vocab_model.config.vocab_size, compact=False)
    assert plain.bias is None and plain.logit_bias() == {}


def test_the_vllm_path_samples_what_the_trainer_samples(smol_tok):
    """vLLM's structured outputs are the mask alone: the policy server sends the whitespace bias as
    `logit_bias`, and the served draws (same seed) are then the in-process sampler's exactly. The
    real model, whose first choice after `{` is a newline, shows the bias is what makes them agree."""
    model = load_base(str(SMOLLM2_GGUF), pick_device("cpu"), torch.float32)
    fmt = ChatFormat(smol_tok, actions=True)
    grammar = ActionGrammar(smol_tok, action_schema(TOOLS), fmt.terminator_id, model.config.vocab_size)
    prompt = fmt.prompt_ids("use add to reach the target", TOOLS, [{"role": "user", "content": "reach 2"}])
    server = make_server(load_policy(str(SMOLLM2_GGUF)))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def served(seed: int, bias: bool) -> list[int]:
        body = {"prompt": prompt, "max_tokens": 24, "temperature": 1.0, "seed": seed, "logprobs": 0, "return_tokens_as_token_ids": True,
                "stop_token_ids": [fmt.terminator_id], "structured_outputs": {"json": grammar.schema},
                **({"logit_bias": grammar.logit_bias()} if bias else {})}
        req = urllib.request.Request(f"http://127.0.0.1:{server.server_address[1]}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return [int(t.split(":")[1]) for t in json.loads(r.read())["choices"][0]["logprobs"]["tokens"]]

    try:
        unbiased = []
        for seed in range(4):
            local = sample(model, [prompt], max_new_tokens=24, temperature=1.0, stop_ids=fmt.stop_ids, pad_id=smol_tok.pad_token_id,
                           generator=torch.Generator().manual_seed(seed), grammar=grammar).ids[0]
            assert served(seed, bias=True) == local
            unbiased.append(served(seed, bias=False) != local)
    finally:
        server.shutdown()
    assert any(unbiased), "without the bias the served draws must differ somewhere, or this test shows nothing"


def test_tool_parameters_that_fan_out_through_refs_are_refused_not_inlined():
    """Billion laughs: twelve $defs of eight $refs each would inline 8^12 nodes (two a level for 20
    levels took 33 s and 1.2 GiB before the budget)."""
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 8} for i in range(12)}
    defs["d12"] = {"type": "string"}
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}}}
    with pytest.raises(ValueError, match="more than 20000 schema nodes"):
        action_schema([tool])
    deep = {"type": "string"}
    for _ in range(500):
        deep = {"type": "array", "items": deep}
    deep_tool = {"type": "function", "function": {"name": "g", "parameters": deep}}
    with pytest.raises(ValueError, match="deeper than 100 levels"):
        action_schema([deep_tool])
    # Rerun 41b: names in `required` (or enum members) reached through many $refs count too:
    # 70 x 70 refs to 14,000 names walked 69 M of them.
    names = {"type": "function", "function": {"name": "r", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}},
        "allOf": [{"$ref": "#/$defs/A"}] * 10,
        "$defs": {"A": {"allOf": [{"$ref": "#/$defs/B"}] * 10}, "B": {"required": ["a"] * 300}}}}}
    with pytest.raises(ValueError, match="more than 20000 schema nodes"):
        action_schema([names])
    names["function"]["parameters"]["$defs"]["B"] = {"enum": list(range(300))}
    with pytest.raises(ValueError, match="more than 20000 schema nodes"):
        action_schema([names])
    # Rerun 42b: and every character of their strings and names (30,000 reached 60 times).
    names["function"]["parameters"]["allOf"] = [{"$ref": "#/$defs/A"}] * 60
    names["function"]["parameters"]["$defs"] = {"A": {"$ref": "#/$defs/B"}, "B": {"description": "x" * 30_000}}
    with pytest.raises(ValueError, match="more than 1048576 characters"):
        action_schema([names])
    # An ordinary schema with a $ref still inlines.
    ok = {"type": "function", "function": {"name": "h", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "integer"}}}}}
    assert action_schema([ok])["anyOf"][1]["properties"]["arguments"]["properties"]["a"] == {"type": "integer"}


def test_refs_inline_as_the_worker_reads_them():
    """Rerun 26: `definitions.cid` and `$defs.cid` were one name to the trainer (the gold call became
    unwritable), a property named `definitions` was dropped, a `$ref` to `true` threw, and enum
    members were walked as schemas."""
    def args(parameters):
        tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
        return action_schema([tool])["anyOf"][1]["properties"]["arguments"]
    clash = args({"type": "object", "properties": {"a": {"$ref": "#/definitions/cid"}, "b": {"$ref": "#/$defs/cid"}},
                  "definitions": {"cid": {"type": "string"}}, "$defs": {"cid": {"enum": ["zz"]}}})
    assert clash["properties"] == {"a": {"type": "string"}, "b": {"enum": ["zz"]}}
    named = args({"type": "object", "properties": {"definitions": {"type": "string"}, "$defs": {"type": "integer"}},
                  "required": ["definitions"]})
    assert named["properties"] == {"definitions": {"type": "string"}, "$defs": {"type": "integer"}}
    assert args({"type": "object", "properties": {"a": {"$ref": "#/$defs/any"}}, "$defs": {"any": True}})["properties"] == {"a": {}}
    members = [{"$ref": "#/$defs/x"}, [[1]]]
    assert args({"type": "object", "properties": {"a": {"enum": members}}})["properties"]["a"]["enum"] == members
