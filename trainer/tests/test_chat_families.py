"""Each supported model family's real chat template (fixtures/chat_templates) on an offline
tokenizer: over a 3-turn tool episode the mask covers exactly the sampled ids, the appended ids
are what the template itself renders for the same conversation (except where the template is
not prefix-stable itself: the empty think blocks Qwen3 strips from earlier turns without thinking,
the system prompt Mistral drops once the first user turn is answered), tool calls sampled in the family's syntax
parse to OpenAI tool calls and are written back in that syntax; bad templates fail at once."""
import json

import pytest

from families import SPECIALS, family_tokenizer
from trace_trainer import chat as chat_module
from trace_trainer.chat import ChatFormat
from trace_trainer.events import TrainerError

SYSTEM = "You keep a counter."
USER = {"role": "user", "content": "Reach 3 with the add tool."}
TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add n to the counter.",
                                           "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]
ARGS, RESULTS, FINAL = [{"n": 1}, {"n": 2}], ["1", "3"], "The counter is at 3."
MISTRAL_IDS = ["c1a2b3d4e", "f5g6h7i8j"]
THINK = "<think>\n\n</think>\n\n"


def sampled_call(syntax: str, i: int) -> str:
    """A tool call as the family's model writes it (model cards / the templates' own rendering)."""
    n = ARGS[i]["n"]
    return {
        "hermes": f'<tool_call>\n{{"name": "add", "arguments": {{"n": {n}}}}}\n</tool_call>',
        "llama3": f'{{"name": "add", "parameters": {{"n": {n}}}}}',
        "mistral": f'[TOOL_CALLS][{{"name": "add", "arguments": {{"n": {n}}}, "id": "{MISTRAL_IDS[i]}"}}]',
        "mistral11": f'[TOOL_CALLS]add[CALL_ID]{MISTRAL_IDS[i]}[ARGS]{{"n": {n}}}',
        "phi4": f'<|tool_call|>[{{"name": "add", "arguments": {{"n": {n}}}}}]<|/tool_call|>',
    }[syntax]


def run_episode(fmt: ChatFormat, texts: list[str]):
    """Builds the token sequence as rollout.collect does: prompt, each sampled turn (text + the
    terminator, as sampled ids), the parsed message, the env's tool result and the appended ids."""
    ids = fmt.prompt_ids(SYSTEM, TOOLS, [USER])
    mask, samples, msgs = [0] * len(ids), [], []
    for i, text in enumerate(texts):
        s = fmt.encode(text) + [fmt.terminator_id]
        ids, mask = ids + s, mask + [1] * len(s)
        samples.append(s)
        decoded, ended = fmt.decode_sample(s)
        assert ended and decoded == text
        content, calls = fmt.parse(decoded, f"call_{i}")
        msg = {"role": "assistant", "content": content or None, **({"tool_calls": calls} if calls else {})}
        msgs.append(msg)
        if i < len(RESULTS):
            assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("add", ARGS[i])]
            # Written back in the family's syntax (reasoning, with Qwen3 thinking, is not part of it).
            assert fmt.assistant_text(msg) == text.split("</think>")[-1].lstrip("\n")
            obs = {"role": "tool", "tool_call_id": calls[0]["id"], "content": RESULTS[i]}
            msgs.append(obs)
            cont = fmt.continuation_ids([obs], ended, after=msg)
            # A sample cut before its terminator gets the terminator from the template.
            assert fmt.continuation_ids([obs], False, after=msg) == [fmt.terminator_id] + cont
            ids, mask = ids + cont, mask + [0] * len(cont)
    return ids, mask, samples, msgs


def mask_runs(ids, mask):
    runs, cur = [], []
    for t, m in zip(ids, mask):
        if m:
            cur.append(t)
        elif cur:
            runs, cur = runs + [cur], []
    return runs + ([cur] if cur else [])


def reference_render(name: str, fmt: ChatFormat, msgs: list[dict], **kwargs) -> str:
    """The same conversation as a client sends it to a server running this template (OpenAI
    messages; arguments as objects, as the templates expect), rendered by the template alone."""
    conv = []
    for m in msgs:
        if m.get("tool_calls") and fmt.family.native_calls:
            conv.append({"role": "assistant", "content": m["content"] or "",
                         "tool_calls": [{"id": c["id"], "type": "function",
                                         "function": {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}}
                                        for c in m["tool_calls"]]})
        elif m["role"] == "assistant":
            conv.append({"role": "assistant", "content": fmt.assistant_text(m)})
        elif name.startswith("gemma"):  # no tool role: results are user turns
            conv.append({"role": "user", "content": m["content"]})
        else:
            conv.append(m)
    if name == "gemma2":  # no system role: the system text opens the first user turn
        head = [{"role": "user", "content": fmt.system_content(SYSTEM, TOOLS) + "\n\n" + USER["content"]}]
    elif name.startswith("gemma"):
        head = [{"role": "system", "content": fmt.system_content(SYSTEM, TOOLS)}, USER]
    elif name == "phi4-mini":
        head = [{"role": "system", "content": SYSTEM, "tools": json.dumps([t["function"] for t in TOOLS])}, USER]
    else:
        head = [{"role": "system", "content": SYSTEM}, USER]
    tools = {"tools": TOOLS} if fmt.family.native_calls else {}
    return fmt.tok.apply_chat_template(head + conv, tokenize=False, add_generation_prompt=False, **tools, **kwargs)


EXPECTED_FAMILY = {"qwen3": "qwen3", "qwen2.5": "qwen2.5", "llama3.1": "llama3", "llama3.2": "llama3", "mistral-nemo": "mistral", "mistral-small3.2": "mistral-v11",
                   "gemma2": "gemma", "gemma3": "gemma", "phi4-mini": "phi4-mini"}


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_a_tool_episode_is_the_templates_own_render(name):
    fmt = ChatFormat(family_tokenizer(name))
    assert fmt.family.name == EXPECTED_FAMILY[name]
    eos = fmt.tok.eos_token
    assert fmt.terminator_id in fmt.stop_ids and fmt.tok.convert_tokens_to_ids(eos) in fmt.stop_ids
    texts = [sampled_call(fmt.family.calls, 0), sampled_call(fmt.family.calls, 1), FINAL]
    ids, mask, samples, msgs = run_episode(fmt, texts)
    assert len(ids) == len(mask) and mask_runs(ids, mask) == samples

    ours = fmt.tok.decode(ids, skip_special_tokens=False)
    ref = reference_render(name, fmt, msgs, **fmt.family.kwargs)
    if name == "qwen3":
        # The one difference: the prompt of each turn ended in an empty think block (thinking
        # off), which stays in the sequence; re-rendering, the template writes it for the last
        # assistant turn only. Stripping it from the earlier two gives the template's text.
        assert ours.count(THINK) == 3 and ref.count(THINK) == 1
        ours = ours.replace(THINK, "", 2)
    if name == "mistral-nemo":
        # Mistral's template writes the system prompt into a user turn only while that turn is the
        # last message: it was in the prompt the first turn was sampled from, and stays there;
        # re-rendering the whole episode, the template leaves it out.
        assert ours.count(SYSTEM) == 1 and SYSTEM not in ref
        ours = ours.replace(SYSTEM + "\n\n", "", 1)
    # The template ends the last turn with its glue (a newline) or the end-of-text token.
    assert ref.startswith(ours) and ref[len(ours):] in ("", "\n", eos), (ref[len(ours) - 40:], ours[-40:])
    # Between the samples, the ids are the tokenizer's own encoding of the template's text. (The
    # whole text re-encoded may differ where a prompt ends in whitespace and a sample begins:
    # sampled ids are kept as sampled, never re-tokenized.)
    for run in mask_runs(ids, [1 - m for m in mask]):
        assert fmt.encode(fmt.tok.decode(run, skip_special_tokens=False)) == run


def test_qwen3_with_thinking_is_prefix_stable_over_a_tool_episode():
    fmt = ChatFormat(family_tokenizer("qwen3"), thinking=True)
    assert fmt.prompt_ids(SYSTEM, TOOLS, [USER])[-3:] == fmt.encode("<|im_start|>assistant\n")[-3:]
    texts = [f"<think>\nI add {a['n']}.\n</think>\n\n" + sampled_call("hermes", i) for i, a in enumerate(ARGS)]
    texts.append("<think>\nDone.\n</think>\n\n" + FINAL)
    ids, mask, samples, msgs = run_episode(fmt, texts)
    assert mask_runs(ids, mask) == samples and msgs[-1]["content"] == FINAL, "reasoning is not content"
    # Reasoning kept in the content: the template re-renders every turn after the query with it.
    for m, text in zip([m for m in msgs if m["role"] == "assistant"], texts):
        m["content"] = text.split("<tool_call>")[0] if m.get("tool_calls") else text
    ours = fmt.tok.decode(ids, skip_special_tokens=False)
    ref = reference_render("qwen3", fmt, msgs, enable_thinking=True)
    assert ref == ours + "\n"


@pytest.mark.parametrize("syntax,text,content", [
    ("llama3", '<|python_tag|>{"name": "add", "parameters": {"n": 4}}', ""),
    ("mistral", 'Adding. [TOOL_CALLS] [{"name": "add", "arguments": {"n": 4}}]', "Adding."),
    ("mistral11", 'Adding.[TOOL_CALLS]add[ARGS]{"n": 4}', "Adding."),
    ("phi4", 'functools[{"name": "add", "arguments": {"n": 4}}]', ""),
    ("phi4", '<|tool_call|>[{"type": "function", "function": {"name": "add", "arguments": {"n": 4}}}]<|/tool_call|>', ""),
    ("hermes", 'Sure.\n<tool_call>\n{"name": "add", "arguments": {"n": 4}}\n</tool_call>', "Sure."),
])
def test_variants_of_each_syntax_parse(syntax, text, content):
    from trace_trainer.chat import _PARSERS, MISTRAL_ID_RE

    got, calls = _PARSERS[syntax](text, "call_3")
    assert got == content and [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("add", {"n": 4})]
    if syntax == "mistral":  # no id sampled: one of the 9 alphanumerics its template requires
        assert MISTRAL_ID_RE.fullmatch(calls[0]["id"])


def test_plain_text_is_a_message_in_every_syntax():
    from trace_trainer.chat import _PARSERS

    for parse in _PARSERS.values():
        assert parse("The counter is at 3.", "c") == ("The counter is at 3.", [])


def _tok_with(template):
    tok = family_tokenizer("qwen2.5")
    tok.chat_template = template
    return tok


def test_a_model_without_a_chat_template_is_named_in_one_line():
    with pytest.raises(TrainerError) as e:
        ChatFormat(_tok_with(None))
    assert e.value.type == "fatal:NoChatTemplate" and "test/qwen2.5" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("template,missing", [
    ("{% for m in messages %}{{ m['content'] }}{% endfor %}", "no stop token"),
    ("{{ messages[-1]['content'] }}<|im_end|>", "does not write assistant content verbatim"),
    ("{% if messages|length > 2 %}{{ raise_exception('one exchange only') }}{% endif %}"
     "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}", "cannot render a tool turn"),
])
def test_a_template_that_cannot_be_appended_to_fails_before_any_rollout(template, missing):
    with pytest.raises(TrainerError) as e:
        ChatFormat(_tok_with(template))
    assert e.value.type == "fatal:UnsupportedChatTemplate" and "test/qwen2.5" in str(e.value) and missing in str(e.value)


def test_trainer_gate_and_server_fail_on_the_template_before_loading_the_weights(tmp_path, monkeypatch):
    import trace_trainer.grpo as grpo_mod
    import trace_trainer.model as model_mod
    from trace_trainer.config import GateConfig, GrpoConfig, from_dict
    from trace_trainer.gate import fit_gate
    from trace_trainer.serve import load_policy

    def no_weights(*a, **kw):
        raise AssertionError("the weights were loaded before the chat template was checked")

    monkeypatch.setattr(grpo_mod, "load_base", no_weights)
    monkeypatch.setattr(model_mod, "load_base", no_weights)
    tok = _tok_with(None)
    monkeypatch.setattr(grpo_mod, "load_tokenizer", lambda name: tok)
    monkeypatch.setattr(model_mod, "load_tokenizer", lambda name: tok)
    runs = [lambda: grpo_mod.GrpoTrainer(from_dict(GrpoConfig, {"model": "m", "env_url": "http://127.0.0.1:9", "output_uri": str(tmp_path / "o")})),
            lambda: fit_gate(from_dict(GateConfig, {"model": "m", "adapters": [{"name": "a", "uri": "x"}, {"name": "b", "uri": "y"}],
                                               "trajectories": ["t.jsonl"], "output_uri": str(tmp_path / "g")})),
            lambda: load_policy("m")]
    for run in runs:
        with pytest.raises(TrainerError) as e:
            run()
        assert e.value.type == "fatal:NoChatTemplate"


def test_a_template_that_drops_tool_turns_gets_tool_results_as_user_turns():
    """A capital T in the template ("Today Date", as in Llama 3's) is no tool role."""
    template = ("Today Date{% for m in messages %}{% if m['role'] != 'tool' %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fmt = ChatFormat(_tok_with(template))
    cont = fmt.continuation_ids([{"role": "tool", "tool_call_id": "c", "content": "42"}], True)
    assert fmt.tok.decode(cont, skip_special_tokens=False) == "\n<|im_start|>user\n42<|im_end|>\n<|im_start|>assistant\n"


def test_served_chat_takes_qwen3_thinking_as_vllm_does():
    """`chat_template_kwargs.enable_thinking` (vLLM's request field) turns thinking on; off by default."""
    from trace_trainer.serve import Policy
    from trace_trainer.tiny import build_model

    tok = family_tokenizer("qwen3")
    policy = Policy(build_model(len(tok), hidden=16, layers=1, intermediate=32, pad_id=tok.pad_token_id, eos_id=tok.eos_token_id), tok, "m")
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0}
    off = policy.complete(body)["usage"]["prompt_tokens"]
    on = policy.complete({**body, "chat_template_kwargs": {"enable_thinking": True}})["usage"]["prompt_tokens"]
    assert off - on == len(policy.fmt.encode(THINK))


def test_half_a_utf16_pair_in_an_envs_text_is_the_replacement_character(smol_tok):
    """A generated env's JSON can hold "\\ud800": json.loads gives it back alone, and the tokenizer
    raised on it, so one tool result (or gold's words, in the gate's data) stopped training."""
    fmt = ChatFormat(smol_tok)
    half = json.loads('"a\\ud800b"')
    whole = "a\ufffdb"
    messages = [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"n": 1})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": half}, {"role": "assistant", "content": half}]
    assert fmt.prompt_ids(half, TOOLS, [{"role": "user", "content": half}]) == \
        fmt.prompt_ids(whole, TOOLS, [{"role": "user", "content": whole}])
    as_whole = [{**m, "content": whole} if m["content"] == half else m for m in messages]
    assert fmt.conversation_ids(SYSTEM, TOOLS, messages) == fmt.conversation_ids(SYSTEM, TOOLS, as_whole)
    assert fmt.continuation_ids(messages[2:3], True, after=messages[1]) == \
        fmt.continuation_ids(as_whole[2:3], True, after=as_whole[1])


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_an_env_text_holding_the_formats_own_marker_is_text(name):
    """The chat format finds where a continuation begins by a marker it writes as assistant
    content; an env's tool result or user reply holding those letters raised (rerun 48b)."""
    fmt = ChatFormat(family_tokenizer(name))
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": MISTRAL_IDS[0], "type": "function", "function": {"name": "add", "arguments": json.dumps(ARGS[0])}}]}
    marker = chat_module._SENTINEL
    ids = fmt.continuation_ids([{"role": "tool", "tool_call_id": MISTRAL_IDS[0], "content": f"a {marker} b"}], True, after=call)
    assert marker in fmt.tok.decode(ids, skip_special_tokens=False)
    ids = fmt.continuation_ids([{"role": "user", "content": marker}], True, after={"role": "assistant", "content": "ok"})
    assert marker in fmt.tok.decode(ids, skip_special_tokens=False)
