"""Rollouts over the env HTTP protocol: exact masks, tool-call parsing, client errors."""
import pytest
import torch

from trace_trainer.chat import ChatFormat, parse_assistant
from trace_trainer.envclient import EnvClient
from trace_trainer.events import TrainerError
from trace_trainer.rollout import collect
from trace_trainer.sampler import Samples, in_process


def _collect(model, tok, served, **kw):
    env = EnvClient(served.url)
    args = dict(rollouts_per_start=3, max_new_tokens=12, max_turns=4, max_errors=4, max_seq_len=1024)
    args.update(kw)
    fmt = ChatFormat(tok)
    return collect(in_process(model, fmt, 1.0), fmt, env, env.info(), [{"seed": 1}, {"seed": 2}], **args)


def test_mask_covers_exactly_the_sampled_tokens(tool_model, tool_tok, counter_env):
    torch.manual_seed(0)
    rollouts = _collect(tool_model, tool_tok, counter_env)
    assert len(rollouts) == 6
    multi_turn = 0
    for r in rollouts:
        assert len(r.ids) == len(r.mask)
        # Contiguous mask-1 runs are, in order, exactly the ids the sampler returned for each turn.
        runs, cur = [], []
        for t, m in zip(r.ids, r.mask):
            if m:
                cur.append(t)
            elif cur:
                runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
        assert runs == r.samples
        assert sum(r.mask) == r.sampled_tokens == sum(len(s) for s in r.samples)
        multi_turn += len(r.samples) > 1
        assert r.termination in ("user_stop", "max_steps", "max_errors")
    assert multi_turn > 0, "the counter env answers messages, so episodes must span several turns"


def test_env_turns_are_appended_not_retokenized(tool_model, tool_tok, counter_env):
    torch.manual_seed(1)
    fmt = ChatFormat(tool_tok)
    for r in _collect(tool_model, tool_tok, counter_env):
        # The prompt prefix is the template's rendering of the opening messages, token for token.
        env = EnvClient(counter_env.url)
        info = env.info()
        opening = fmt.prompt_ids(info["systemPrompt"], info["tools"], r.messages[:1])
        assert r.ids[: len(opening)] == opening
        assert r.mask[: len(opening)] == [0] * len(opening)


def test_tool_calls_are_parsed_into_actions():
    content, calls = parse_assistant('I will add.\n<tool_call>\n{"name": "add", "arguments": {"n": 2}}\n</tool_call>', "c1")
    assert content == "I will add."
    assert calls == [{"id": "c1_0", "type": "function", "function": {"name": "add", "arguments": '{"n": 2}'}}]
    assert parse_assistant("<tool_call>{not json}</tool_call> hi", "c")[1] == []
    assert parse_assistant("plain answer", "c") == ("plain answer", [])


def test_tool_call_reaches_the_env_and_its_result_comes_back(tool_tok, counter_env):
    env = EnvClient(counter_env.url)
    ep = env.create(seed=3)
    res = env.step(ep["episodeId"], {"type": "tool_call", "call": {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"n": 2}'}}})
    assert res["observation"] == {"role": "tool", "tool_call_id": "c", "content": "2"} and res["error"] is False
    fork = env.fork(ep["episodeId"])
    env.step(fork, {"type": "tool_call", "call": {"id": "d", "type": "function", "function": {"name": "add", "arguments": '{"n": 5}'}}})
    again = env.step(ep["episodeId"], {"type": "tool_call", "call": {"id": "e", "type": "function", "function": {"name": "add", "arguments": '{"n": 0}'}}})
    assert again["observation"]["content"] == "2", "a fork must not change the original episode"
    env.delete(ep["episodeId"])


def test_client_errors_say_whether_a_retry_can_help(counter_env):
    env = EnvClient(counter_env.url)
    with pytest.raises(TrainerError) as e:
        env.step("nope", {"type": "message", "content": "x"})
    assert e.value.type == "fatal:Env_unknown_episode"
    counter_env.close()
    with pytest.raises(TrainerError) as e:
        EnvClient(counter_env.url, timeout=2).info()
    assert e.value.type == "retryable:EnvUnavailable"


def test_each_episode_has_its_own_token_budget_and_ends_alone(tool_tok, counter_env):
    """One episode near max_seq_len must not cut the others' turns, and none ends up longer than it."""
    fmt = ChatFormat(tool_tok)
    env = EnvClient(counter_env.url)
    evaluated, evaluate = [], env.evaluate
    env.evaluate = lambda episode, msgs, term: evaluated.append((episode, term)) or evaluate(episode, msgs, term)
    info = env.info()
    opening = len(fmt.prompt_ids(info["systemPrompt"], info["tools"], [{"role": "user", "content": "reach 1"}]))
    max_seq_len, asked = opening + 40, []
    filler = fmt.encode("go on")[0]

    def generate(prompts, caps, grammar):
        asked.append([(len(p), c) for p, c in zip(prompts, caps)])
        # Episode 0 writes as much as it may; the others a short message.
        return Samples([[filler] * c if i == 0 else [filler, fmt.stop_ids[0]] for i, c in enumerate(caps)], [[], []])

    rollouts = collect(generate, fmt, env, info, [{"seed": 1}], rollouts_per_start=2, max_new_tokens=30, max_turns=4, max_errors=4,
                       max_seq_len=max_seq_len)
    for turn in asked:
        assert all(c == min(30, max_seq_len - n) for n, c in turn)
    assert asked[0] == [(opening, 30), (opening, 30)]
    # Episode 0 runs out of room after its first turn and ends alone; episode 1 keeps its full budget.
    assert rollouts[0].termination == "max_steps" and len(rollouts[0].samples) == 1
    assert len(rollouts[1].samples) == 2 and [len(t) for t in asked] == [2, 1]
    assert all(len(r.ids) <= max_seq_len for r in rollouts)
    # The cut episode scores 0 whatever the env answers (rerun 18: a generated env paid endings only the
    # context makes), but the env evaluates every episode, in order (rerun 22: one left out told training apart).
    assert [t for _, t in evaluated] == ["max_steps", rollouts[1].termination] and evaluated[0][0] != evaluated[1][0]
    assert rollouts[0].reward_info["details"] == {"cut": "max_seq_len"} and rollouts[0].reward == 0.0
    assert "cut" not in rollouts[1].reward_info.get("details", {})


def test_an_action_its_length_cap_stopped_is_cut_not_sent(smol_tok, counter_env):
    """In the action format a reply its cap stopped before the terminator is no action: the episode
    scores 0, and its raw JSON never reaches the env, in a step or in evaluate (rerun 19: a generated
    env paid exactly those, which validation's policies never send)."""
    fmt = ChatFormat(smol_tok, actions=True)
    env = EnvClient(counter_env.url)
    sent, scored = [], []
    step, evaluate = env.step, env.evaluate
    env.step = lambda episode, action: sent.append(action) or step(episode, action)
    env.evaluate = lambda episode, msgs, term: scored.append((msgs, term)) or evaluate(episode, msgs, term)
    unfinished = fmt.encode('{"type": "message", "content": "I will now ')
    finished = fmt.encode('{"type": "message", "content": "hi"}') + [fmt.terminator_id]

    def generate(prompts, caps, grammar):
        return Samples([unfinished[:c] if i == 0 else finished for i, c in enumerate(caps)], [[0.0]] * len(prompts))

    rollouts = collect(generate, fmt, env, env.info(), [{"seed": 1}], rollouts_per_start=2, max_new_tokens=len(unfinished),
                       max_turns=1, max_errors=4, max_seq_len=4096)
    assert sent == [{"type": "message", "content": "hi"}]
    cut, whole = rollouts
    # Both are evaluated, in order (rerun 22); the cut one on what the env was sent, as max_steps.
    assert len(scored) == 2 and scored[0] == (cut.messages[:-1], "max_steps")
    assert cut.reward == 0.0 and cut.reward_info["details"] == {"cut": "max_new_tokens"} and cut.termination == "max_steps"
    assert cut.messages[-1] == {"role": "assistant", "content": '{"type": "message", "content": "I will now '}
    assert "cut" not in whole.reward_info.get("details", {})


def test_an_empty_reply_ends_the_episode_without_a_step(tool_tok, counter_env):
    """Nothing to say ends the episode as validation's policies end it, with no empty message sent
    to the env (a generated env paid those only training sent, rerun 18)."""
    fmt = ChatFormat(tool_tok)
    env = EnvClient(counter_env.url)
    sent = []
    step = env.step
    env.step = lambda episode, action: sent.append(action) or step(episode, action)

    def generate(prompts, caps, grammar):
        return Samples([[fmt.stop_ids[0]] for _ in prompts], [[0.0] for _ in prompts])

    rollouts = collect(generate, fmt, env, env.info(), [{"seed": 1}], rollouts_per_start=2, max_new_tokens=8, max_turns=4, max_errors=4,
                       max_seq_len=4096)
    assert sent == []
    for r in rollouts:
        assert r.termination == "agent_stop" and r.steps == 1 and r.samples == [[fmt.stop_ids[0]]]
        assert not [m for m in r.messages if m["role"] == "assistant"]


def test_an_opening_the_template_cannot_render_fails_once_naming_the_episode():
    """Two user turns make Mistral's template raise (reruns 48b, 49b): the env's fault, not the
    run's, so no retry, and the message names the episode."""
    from families import family_tokenizer

    class TwoUserTurns:
        def create(self, task_id=None, seed=None):
            return {"episodeId": "ep-7", "taskId": "seed-1",
                    "initialMessages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}

    fmt = ChatFormat(family_tokenizer("mistral-nemo"))
    with pytest.raises(TrainerError) as e:
        collect(lambda *a: None, fmt, TwoUserTurns(), {"systemPrompt": "s", "tools": []}, [{"seed": 1}],
                rollouts_per_start=1, max_new_tokens=4, max_turns=1, max_errors=1, max_seq_len=256)
    assert e.value.type == "fatal:EnvText" and "env episode ep-7" in str(e.value)
