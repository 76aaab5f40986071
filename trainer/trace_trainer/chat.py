"""The policy's side of the chat: prompts from the model's own chat template, tool calls parsed
from generated text, and the token ids of each new environment turn, so a rollout's token
sequence is built incrementally and the sampled tokens are never re-tokenized."""
from __future__ import annotations

import json
import re

from .grammar import action_text, parse_action

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)

_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one function per turn. The functions, as JSON schemas:\n<tools>\n{tools}\n</tools>\n\n"
    "To call a function, reply with exactly:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <arguments-object>}}\n</tool_call>"
)
_PROBE_TOOL = {"type": "function", "function": {"name": "zz_probe_tool_name", "description": "", "parameters": {"type": "object", "properties": {}}}}
_STOP_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class ChatFormat:
    """`actions=True` is the format of constrained decoding (grammar.py): the tools and the JSON
    action form in the system prompt, earlier turns as actions, tool results as user turns, as the
    embedded LLM server renders them; otherwise Hermes-style `<tool_call>` text."""

    def __init__(self, tokenizer, actions: bool = False):
        self.tok = tokenizer
        self.actions = actions
        stop = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        vocab = tokenizer.get_vocab()
        stop |= {vocab[t] for t in _STOP_TOKENS if t in vocab}
        self.stop_ids = sorted(stop)
        # The turn terminator the template writes after an assistant message: the token that should end a sample.
        self.eos_text = self._assistant_terminator()
        self.terminator_id = vocab.get(self.eos_text, tokenizer.eos_token_id)
        self.template_renders_tools = self._renders_tools()
        self._glue = self._turn_glue()

    # ---- rendering -------------------------------------------------------------------------------
    def _render(self, messages, add_generation_prompt: bool, tools=None) -> str:
        kw = {"tools": tools} if tools and self.template_renders_tools and not self.actions else {}
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kw)

    def _renders_tools(self) -> bool:
        msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        try:
            text = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, tools=[_PROBE_TOOL])
        except Exception:
            return False
        return "zz_probe_tool_name" in text

    def _assistant_terminator(self) -> str:
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        text = self.tok.apply_chat_template(base + [{"role": "assistant", "content": "QQQ"}], tokenize=False)
        after = text[text.rfind("QQQ") + 3:]
        for t in _STOP_TOKENS + ((self.tok.eos_token,) if self.tok.eos_token else ()):
            if t and after.startswith(t):
                return t
        return self.tok.eos_token or ""

    def _turn_glue(self) -> str:
        """Text the template puts between an assistant's terminator and the next message (e.g. a newline)."""
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        text = self.tok.apply_chat_template(base + [{"role": "assistant", "content": "QQQ"}], tokenize=False)
        after = text[text.rfind("QQQ") + 3:]
        return after[len(self.eos_text):] if after.startswith(self.eos_text) else ""

    def system_content(self, system_prompt: str, tools) -> str:
        if tools and self.actions:
            return f"{system_prompt}\n\n{_action_instructions(tools)}" if system_prompt else _action_instructions(tools)
        if not tools or self.template_renders_tools:
            return system_prompt
        return system_prompt + _TOOLS_HEADER.format(tools="\n".join(json.dumps(t) for t in tools))

    def as_template_messages(self, messages, names: dict | None = None):
        """Assistant tool calls become `<tool_call>` text (or actions) and tool results plain turns,
        for any template; `names` maps the ids of calls made before `messages` to tool names."""
        out, names = [], dict(names or {})
        for m in messages:
            if m["role"] == "assistant":
                names.update({c["id"]: c["function"]["name"] for c in m.get("tool_calls") or []})
                out.append({"role": "assistant", "content": self.assistant_text(m)})
            elif m["role"] == "tool" and self.actions:
                cid = m.get("tool_call_id", "")
                out.append({"role": "user", "content": f"Result of tool call {names.get(cid, '')} ({cid}):\n{_tool_content(m)}"})
            elif m["role"] == "tool":
                out.append({"role": "tool" if self._tool_role_ok() else "user", "content": _tool_content(m)})
            else:
                out.append({"role": m["role"], "content": m.get("content") or ""})
        return out

    def _tool_role_ok(self) -> bool:
        if not hasattr(self, "_tool_ok"):
            msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
                    {"role": "tool", "content": "T"}]
            try:
                self._tool_ok = "T" in self.tok.apply_chat_template(msgs, tokenize=False)
            except Exception:
                self._tool_ok = False
        return self._tool_ok

    def assistant_text(self, m) -> str:
        if self.actions:
            return action_text(m)
        parts = [m.get("content") or ""]
        for c in m.get("tool_calls") or []:
            try:
                args = json.loads(c["function"]["arguments"])
            except (json.JSONDecodeError, TypeError):
                args = c["function"]["arguments"]
            parts.append("<tool_call>\n" + json.dumps({"name": c["function"]["name"], "arguments": args}) + "\n</tool_call>")
        return "\n".join(p for p in parts if p)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def prompt_ids(self, system_prompt: str, tools, messages) -> list[int]:
        """The opening prompt: system (with tools) + the episode's first messages + generation prompt."""
        msgs = [{"role": "system", "content": self.system_content(system_prompt, tools)}] + self.as_template_messages(messages)
        return self.encode(self._render(msgs, True, tools))

    def continuation_ids(self, new_messages, ended_with_stop: bool, after: dict | None = None) -> list[int]:
        """Ids that follow a sampled assistant turn (`after`, whose calls the new tool messages
        answer): terminator (if the sample was cut), glue, the new non-assistant messages and the
        next generation prompt, from the template's own text."""
        names = {c["id"]: c["function"]["name"] for c in (after or {}).get("tool_calls") or []}
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "QQQ"}]
        prefix = self._render(base, False)
        full = self._render(base + self.as_template_messages(new_messages, names), True)
        if not full.startswith(prefix):
            raise ValueError("chat template is not prefix-stable; cannot append turns without re-tokenizing")
        text = ("" if ended_with_stop else self.eos_text) + self._glue + full[len(prefix):]
        return self.encode(text)

    def conversation_ids(self, system_prompt: str, tools, messages) -> tuple[list[int], list[int]]:
        """Ids and assistant mask of a recorded trajectory (gate data): assistant turns are encoded
        as the text the policy would have produced, followed by the terminator."""
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
        ids = self.prompt_ids(system_prompt, tools, messages[:first])
        mask = [0] * len(ids)
        i = first
        while i < len(messages):
            a = self.encode(self.assistant_text(messages[i]) + self.eos_text)
            ids += a
            mask += [1] * len(a)
            j = i + 1
            while j < len(messages) and messages[j]["role"] != "assistant":
                j += 1
            if j > i + 1:
                c = self.continuation_ids(messages[i + 1:j], ended_with_stop=True, after=messages[i])
                ids += c
                mask += [0] * len(c)
            i = j
        return ids, mask

    # ---- parsing ---------------------------------------------------------------------------------
    def parse(self, text: str, call_id: str):
        """(content, tool_calls) of a sampled turn, in this format's syntax."""
        return parse_action(text, call_id) if self.actions else parse_assistant(text, call_id)

    def decode_sample(self, ids: list[int]) -> tuple[str, bool]:
        ended = bool(ids) and ids[-1] in self.stop_ids
        body = ids[:-1] if ended else ids
        return self.tok.decode(body, skip_special_tokens=False), ended


_PROBE_ACTION = '{"type": "message", "content": "ok"}'


def uses_actions(setting, tokenizer) -> bool:
    """Whether constrained decoding (the JSON action format) is on for `setting` (True, False or
    "auto": on for a model whose chat template has no tool format of its own, e.g. SmolLM2, and
    whose vocabulary can write JSON actions at all, which a word-level test vocabulary cannot)."""
    if setting == "auto":
        spells = tokenizer.decode(tokenizer.encode(_PROBE_ACTION, add_special_tokens=False)) == _PROBE_ACTION
        return spells and not ChatFormat(tokenizer).template_renders_tools
    return bool(setting)


def _action_instructions(tools) -> str:
    """The embedded LLM server's tool instructions (infra/llm/chat-prompt.ts), word for word, so a
    policy sees one prompt whichever backend samples it."""
    listed = "\n".join(json.dumps({"name": t["function"]["name"], "description": t["function"].get("description", ""),
                                    "parameters": _schema_for_prompt(t["function"].get("parameters") or {})}, separators=(",", ":"))
                       for t in tools)
    return "\n".join([
        "You are given a question and a set of tools. Call the tool that answers the question, with arguments taken from the question.",
        f"<tools>\n{listed}\n</tools>",
        "Answer with exactly one JSON object.",
        'To call a tool: {"type": "tool_call", "name": <tool name>, "arguments": {<arguments>}}',
        'To reply to the user instead: {"type": "message", "content": <your reply>}',
    ])


def _schema_for_prompt(schema):
    """Schema bookkeeping ($schema, titles) only distracts a small model, which copies it into arguments."""
    if isinstance(schema, list):
        return [_schema_for_prompt(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _schema_for_prompt(x) for n, x in v.items()} if k in ("properties", "$defs") and isinstance(v, dict) else _schema_for_prompt(v))
            for k, v in schema.items() if k not in ("$schema", "$id", "title", "additionalProperties")}


def _tool_content(m) -> str:
    return m.get("content") or ""


def parse_assistant(text: str, call_id: str):
    """(content, tool_calls) of generated text: the first well-formed `<tool_call>` JSON becomes a
    call; text outside tool-call blocks is the content."""
    calls = []
    for match in TOOL_CALL_RE.finditer(text):
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments", {})
            calls.append({
                "id": f"{call_id}_{len(calls)}",
                "type": "function",
                "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
            })
    content = TOOL_CALL_RE.sub("", text).strip()
    return content, calls
