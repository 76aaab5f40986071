"""Multi-turn rollouts against an environment served over the env protocol. Every episode's token
sequence is built from the prompt ids, exactly the sampled ids (mask 1) and the ids of the
environment's turns (mask 0); the transcript is kept alongside for the environment and the logs.
Generation is pluggable (in-process or a policy server), the loop and the masks are not."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .chat import ChatFormat, env_text
from .envclient import EnvClient
from .events import Interrupted
from .grammar import ActionGrammar
from .sampler import Samples

# (prompt ids per live episode, max new tokens per episode, action grammar or None) -> the sampled
# ids per episode (a stop id included when the sample ended on one) and their log-probs.
Generate = Callable[[list[list[int]], list[int], "ActionGrammar | None"], Samples]


@dataclass
class Rollout:
    group: int
    seed: int | None
    task_id: str
    ids: list[int]
    mask: list[int]
    messages: list[dict]
    reward: float = 0.0
    success: bool = False
    termination: str = "max_steps"
    reward_info: dict = field(default_factory=dict)
    steps: int = 0
    sampled_tokens: int = 0
    # Sampled ids per assistant turn, kept to verify the mask (tests), replay the grammar and count tokens.
    samples: list[list[int]] = field(default_factory=list)
    # The sampler's log-prob of each sampled token, in order (the policy that drew them).
    sample_logprobs: list[float] = field(default_factory=list)


class _Live:
    def __init__(self, rollout: Rollout, episode_id: str, max_errors: int):
        self.r, self.episode_id, self.max_errors, self.errors, self.done = rollout, episode_id, max_errors, 0, False
        # What cut the episode short, if anything did: "max_seq_len" (the context) or "max_new_tokens"
        # (an action that never finished). Not the env or max_turns: the env never scores it.
        self.cut: str | None = None
        # Whether the transcript ends with an unfinished action the env was never sent.
        self.unsent = False


def _cut(limit: str) -> dict:
    """What a cut episode scores: nothing, whatever the env answers. The env still evaluates it, on
    what it was sent (never the unfinished action: a generated env paid its raw JSON, rerun 19),
    as max_steps, as validation ends an episode out of the same room (validate.ts `PolicyCut`):
    an episode left unevaluated told training from validation (rerun 22)."""
    return {"reward": 0.0, "components": {}, "success": False, "details": {"cut": limit}}


def collect(generate: Generate, fmt: ChatFormat, env: EnvClient, env_info: dict, starts: list[dict], *, rollouts_per_start: int,
            max_new_tokens: int, max_turns: int, max_errors: int, max_seq_len: int, should_stop=lambda: False,
            first_group: int = 0, grammar: ActionGrammar | None = None) -> list[Rollout]:
    """Runs `rollouts_per_start` episodes from each start ({seed} or {taskId}) in lockstep turns,
    batching generation across all live episodes; start i's rollouts form group first_group + i.
    Each episode samples at most what is left of its own `max_seq_len` and ends alone when out of room."""
    system, tools = env_info["systemPrompt"], env_info["tools"]
    live: list[_Live] = []
    for g, start in enumerate(starts, first_group):
        for _ in range(rollouts_per_start):
            ep = env.create(task_id=start.get("taskId"), seed=start.get("seed"))
            msgs = list(ep["initialMessages"])
            with env_text(f"env episode {ep['episodeId']}"):
                ids = fmt.prompt_ids(system, tools, msgs)
            live.append(_Live(Rollout(g, start.get("seed"), ep["taskId"], ids, [0] * len(ids), msgs), ep["episodeId"], max_errors))
    try:
        for turn in range(max_turns):
            active = [x for x in live if not x.done]
            if not active:
                break
            if should_stop():
                raise Interrupted()
            for x in active:  # a prompt already at the limit ends alone
                if len(x.r.ids) >= max_seq_len:
                    x.done, x.cut, x.r.termination = True, "max_seq_len", "max_steps"
            active = [x for x in active if not x.done]
            if not active:
                break
            caps = [min(max_new_tokens, max_seq_len - len(x.r.ids)) for x in active]
            new = generate([x.r.ids for x in active], caps, grammar)
            for x, toks, lps, cap in zip(active, new.ids, new.logprobs, caps):
                _advance(x, toks, lps, turn, fmt, env, max_seq_len, "max_new_tokens" if cap == max_new_tokens else "max_seq_len")
        for x in live:
            if not x.done:
                x.r.termination = "max_steps"
            sent = x.r.messages[:-1] if x.unsent else x.r.messages
            info = env.evaluate(x.episode_id, sent, x.r.termination)
            info = _cut(x.cut) if x.cut else info
            x.r.reward, x.r.success, x.r.reward_info = float(info["reward"]), bool(info["success"]), info
    finally:
        for x in live:
            try:
                env.delete(x.episode_id)
            except Exception:  # a lost episode must not hide the error that ended the loop
                pass
    return [x.r for x in live]


def _advance(x: _Live, toks: list[int], lps: list[float], turn: int, fmt: ChatFormat, env: EnvClient, max_seq_len: int,
             cap_limit: str) -> None:
    """One turn of an episode: its sample is parsed into an action and stepped. `cap_limit` names
    what capped the sample's length (max_new_tokens or the context's room)."""
    r = x.r
    r.ids += toks
    r.mask += [1] * len(toks)
    r.samples.append(list(toks))
    r.sample_logprobs += lps
    r.sampled_tokens += len(toks)
    r.steps += 1
    text, ended = fmt.decode_sample(toks)
    if not ended and fmt.actions:
        # In the action format a reply ends with its terminator; one its length cap stopped first is
        # no action (its raw JSON would be the message, which a generated env paid, rerun 19).
        r.messages.append({"role": "assistant", "content": text})
        x.done, x.cut, x.unsent, r.termination = True, cap_limit, True, "max_steps"
        return
    content, calls = fmt.parse(text, f"call_{turn}")
    if not calls and not (content or "").strip():
        # Nothing to say ends the episode, as validation's policies and the agent loop end it: an
        # empty message step was something only training sent, and a generated env paid it (rerun 18).
        x.done, r.termination = True, "agent_stop"
        return
    if calls:
        msg = {"role": "assistant", "content": content or None, "tool_calls": calls[:1]}
        action = {"type": "tool_call", "call": calls[0]}
    else:
        msg = {"role": "assistant", "content": content}
        action = {"type": "message", "content": content}
    r.messages.append(msg)
    res = env.step(x.episode_id, action)
    r.messages.append(res["observation"])
    x.errors += 1 if res.get("error") else 0
    if res.get("done"):
        x.done, r.termination = True, res.get("termination") or "agent_stop"
        return
    if x.errors >= x.max_errors:
        x.done, r.termination = True, "max_errors"
        return
    with env_text(f"env episode {x.episode_id}"):
        cont = fmt.continuation_ids([res["observation"]], ended, after=msg)
    # The next turn needs the env's reply and at least one sampled token inside the context.
    if len(r.ids) + len(cont) >= max_seq_len:
        x.done, x.cut, r.termination = True, "max_seq_len", "max_steps"
        return
    r.ids += cont
    r.mask += [0] * len(cont)
