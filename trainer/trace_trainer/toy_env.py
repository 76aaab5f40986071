"""Small verifiable environments in Python, for the trainer's tests and the GPU check (where no
Node runtime is assumed). They follow the Environment interface of envs/environment.ts and are
served over the same HTTP protocol by env_server.py."""
from __future__ import annotations

import copy
import json
import random


class SayWordEnv:
    """One turn: the user asks for a word drawn from `words` by the seed; reward 1 when the reply's
    first word is that word, `partial` when it is another of the words (as the paper's K.1 gives
    partial credit). Ignoring the prompt caps the success rate at 1/len(words)."""

    name = "toy-say-word"

    def __init__(self, words=("red", "blue", "green", "yellow"), partial: float = 0.0):
        self.words, self.partial = list(words), partial

    def info(self):
        return {"name": self.name, "kind": "synthetic", "description": "say the requested word", "capability": "instruction_following"}

    def tools(self):
        return []

    def system_prompt(self):
        return "reply with the word"

    def reset(self, seed: int):
        return _SayEpisode(self.words[random.Random(seed).randrange(len(self.words))], self.words, self.partial)


class _SayEpisode:
    def __init__(self, target: str, words: list, partial: float):
        self.target, self.words, self.partial = target, words, partial

    def initial_messages(self):
        return [{"role": "user", "content": f"say {self.target}"}]

    def step(self, action):
        if action["type"] == "tool_call":
            call = action["call"]
            return {"observation": {"role": "tool", "tool_call_id": call["id"], "content": "no tools here"}, "error": True, "done": False}
        return {"observation": {"role": "user", "content": "bye"}, "done": True, "error": False, "termination": "agent_stop"}

    def evaluate(self, messages, termination):
        first = next((m for m in messages if m["role"] == "assistant"), None)
        words = ((first or {}).get("content") or "").split()
        ok = bool(words) and words[0] == self.target
        reward = 1.0 if ok else self.partial if words and words[0] in self.words else 0.0
        return {"reward": reward, "components": {"word": reward}, "success": ok}

    def fork(self):
        return copy.deepcopy(self)


class CounterEnv:
    """Multi-turn with a tool: `add(n)` changes a counter; the user answers each message until the
    agent has spoken `turns` times. Reward 1 when the counter equals the seeded target."""

    name = "toy-counter"

    def __init__(self, turns: int = 2):
        self.turns = turns

    def info(self):
        return {"name": self.name, "kind": "synthetic", "description": "reach a target with add()", "capability": "tool_calling_precision"}

    def tools(self):
        return [{"type": "function", "function": {"name": "add", "description": "add n to the counter",
                                                  "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]

    def system_prompt(self):
        return "use add to reach the target"

    def reset(self, seed: int):
        return _CounterEpisode(random.Random(seed).randrange(1, 4), self.turns)


class _CounterEpisode:
    def __init__(self, target: int, turns: int):
        self.target, self.turns, self.value, self.spoken = target, turns, 0, 0

    def initial_messages(self):
        return [{"role": "user", "content": f"reach {self.target}"}]

    def step(self, action):
        if action["type"] == "tool_call":
            call = action["call"]
            try:
                args = json.loads(call["function"]["arguments"])
                ok = call["function"]["name"] == "add" and isinstance(args.get("n"), int)
            except (json.JSONDecodeError, AttributeError):
                ok = False
            if ok:
                self.value += args["n"]
            content = str(self.value) if ok else "error"
            return {"observation": {"role": "tool", "tool_call_id": call["id"], "content": content}, "error": not ok, "done": False}
        self.spoken += 1
        done = self.spoken >= self.turns
        return {"observation": {"role": "user", "content": "ok" if done else "go on"}, "done": done, "error": False,
                **({"termination": "user_stop"} if done else {})}

    def evaluate(self, messages, termination):
        ok = self.value == self.target
        return {"reward": 1.0 if ok else 0.0, "components": {"db": 1.0 if ok else 0.0}, "success": ok}

    def fork(self):
        return copy.deepcopy(self)


class CopyCodeEnv:
    """One call: the user gives an access code drawn by the seed and asks for it to be submitted;
    reward 1 when `submit_code` gets exactly that code. A test env calibrated for SmolLM2-135M under
    constrained decoding: the base copies the code exactly about a third of the time (it truncates,
    pads or invents), so GRPO groups carry signal and exact copying can be learned."""

    name = "toy-copy-code"
    ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

    def __init__(self, length: int = 5):
        self.length = length

    def info(self):
        return {"name": self.name, "kind": "synthetic", "description": "submit the user's code exactly", "capability": "exact_id_copying"}

    def tools(self):
        return [{"type": "function", "function": {"name": "submit_code", "description": "Submit the user's access code.",
                                                  "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]

    def system_prompt(self):
        return "You are a helpful assistant."

    def reset(self, seed: int):
        rng = random.Random(seed)
        return _CopyEpisode("".join(rng.choice(self.ALPHABET) for _ in range(self.length)))


class _CopyEpisode:
    def __init__(self, code: str):
        self.code, self.submitted = code, None

    def initial_messages(self):
        return [{"role": "user", "content": f"Hi, my access code is {self.code}. Please submit it."}]

    def step(self, action):
        if action["type"] != "tool_call":
            return {"observation": {"role": "user", "content": "Please submit my code."}, "done": True, "error": False, "termination": "user_stop"}
        call = action["call"]
        try:
            self.submitted = json.loads(call["function"]["arguments"]).get("code")
        except (json.JSONDecodeError, AttributeError):
            self.submitted = None
        return {"observation": {"role": "tool", "tool_call_id": call["id"], "content": "submitted"}, "done": True, "error": False,
                "termination": "agent_stop"}

    def evaluate(self, messages, termination):
        ok = self.submitted == self.code
        return {"reward": 1.0 if ok else 0.0, "components": {"exact": 1.0 if ok else 0.0}, "success": ok}

    def fork(self):
        return copy.deepcopy(self)
