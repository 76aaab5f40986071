"""The policy's side of the chat: prompts from the model's own chat template, tool calls written
and parsed in the syntax of the model's family, and the token ids of each new environment turn,
so a rollout's token sequence is built incrementally and the sampled tokens are never re-tokenized.

Families (`FAMILIES`) are recognised by markers in the chat template; any other template that
passes the probes in `ChatFormat._check` is used with Hermes-style `<tool_call>` text."""
from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from .events import TrainerError
from .grammar import action_text, parse_action

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
PHI_CALL_RE = re.compile(r"(?:<\|tool_call\|>|functools)\s*(\[.*?\])\s*(?:<\|/tool_call\|>|$)", re.S)
MISTRAL_ID_RE = re.compile(r"[A-Za-z0-9]{9}")

_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one function per turn. The functions, as JSON schemas:\n<tools>\n{tools}\n</tools>\n\n"
    "To call a function, reply with exactly:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <arguments-object>}}\n</tool_call>"
)
_PROBE_TOOL = {"type": "function", "function": {"name": "zz_probe_tool_name", "description": "", "parameters": {"type": "object", "properties": {}}}}
_HALF_PAIR = re.compile("[\ud800-\udfff]")
_STOP_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
# Stands for a sampled assistant turn in the probe renders; letters no template writes by itself.
_SENTINEL = "ZQXJ7"


@dataclass(frozen=True)
class Family:
    """What a model family's template needs beyond `apply_chat_template`."""
    name: str
    markers: tuple[str, ...]  # all present in the chat template
    calls: str = "hermes"  # tool-call syntax: hermes | llama3 | mistral | mistral11 | phi4
    native_calls: bool = False  # the template renders an assistant's `tool_calls` itself (history is passed that way)
    tool_role: str | None = "tool"  # role of tool results; None: user turns
    alternate: bool = False  # roles must alternate user/assistant: consecutive user turns are merged
    tools_in_system: bool = False  # tools go in the system message's `tools` field as a JSON string (Phi-4-mini)
    kwargs: dict = field(default_factory=dict)  # template variables


# Most specific first; the first whose markers all appear in the template wins.
FAMILIES = (
    Family("qwen3", ("<|im_start|>", "<tool_call>", "</think>"), native_calls=True, kwargs={"enable_thinking": False}),
    Family("qwen2.5", ("<|im_start|>", "<tool_call>"), native_calls=True),
    Family("llama3", ("<|start_header_id|>", "<|eot_id|>", "ipython"), calls="llama3", native_calls=True),
    Family("mistral-v11", ("[INST]", "[TOOL_CALLS]", "[ARGS]"), calls="mistral11", native_calls=True),
    Family("mistral", ("[INST]", "[TOOL_CALLS]"), calls="mistral", native_calls=True),
    Family("gemma", ("<start_of_turn>",), tool_role=None, alternate=True),
    Family("phi4-mini", ("<|assistant|>", "<|tool|>"), calls="phi4", tools_in_system=True),
    Family("generic", ()),
)


def family_of(template: str) -> Family:
    return next(f for f in FAMILIES if all(m in template for m in f.markers))


class ChatFormat:
    """`actions=True` is the format of constrained decoding (grammar.py): the tools and the JSON
    action form in the system prompt, earlier turns as actions, tool results as user turns, as the
    embedded LLM server renders them; otherwise the family's own tool-call syntax. `thinking`
    is Qwen3's `enable_thinking` (off: the instruct default, an empty think block opens each turn)."""

    def __init__(self, tokenizer, actions: bool = False, thinking: bool = False):
        self.tok = tokenizer
        self.actions = actions
        self.model = getattr(tokenizer, "name_or_path", "") or "the model"
        template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
        if not template:
            raise TrainerError("NoChatTemplate", f"model {self.model}: the tokenizer has no chat template "
                               "(chat_template in tokenizer_config.json or chat_template.jinja)", retryable=False)
        fam = family_of(template)
        self.family = replace(fam, kwargs={**fam.kwargs, "enable_thinking": thinking}) if fam.name == "qwen3" else fam
        stop = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        vocab = tokenizer.get_vocab()
        stop |= {vocab[t] for t in _STOP_TOKENS if t in vocab}
        # The turn terminator the template writes after an assistant message: the token that should end a sample.
        self.eos_text = self._assistant_terminator()
        self.terminator_id = vocab.get(self.eos_text, tokenizer.eos_token_id)
        if self.terminator_id is not None:
            stop.add(self.terminator_id)
        self.stop_ids = sorted(stop)
        self._system_ok = self._probe_system()
        self._tool_ok = self._probe_tool_role()
        self.template_renders_tools = self._renders_tools()
        self._check()

    # ---- probes: what the template does, found by rendering it -----------------------------------
    def _fail(self, what: str):
        raise TrainerError("UnsupportedChatTemplate", f"model {self.model}: chat template ({self.family.name}) {what}", retryable=False)

    def _try(self, messages, add_generation_prompt: bool, **kw) -> str | None:
        try:
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                                **self.family.kwargs, **kw)
        except Exception:  # noqa: BLE001 — a template that raises on a probe lacks that feature
            return None

    def _assistant_terminator(self) -> str:
        text = self._try([{"role": "user", "content": "U"}, {"role": "assistant", "content": _SENTINEL}], False)
        if text is None or _SENTINEL not in text:
            self._fail("cannot render a user turn and an assistant turn")
        after = text[text.rfind(_SENTINEL) + len(_SENTINEL):]
        for t in _STOP_TOKENS + ((self.tok.eos_token,) if self.tok.eos_token else ()):
            if t and after.startswith(t):
                return t
        self._fail(f"ends an assistant turn with {after[:20]!r}, which is no stop token of the tokenizer")

    def _probe_system(self) -> bool:
        text = self._try([{"role": "system", "content": "zz_probe_system"}, {"role": "user", "content": "U"}], True)
        return text is not None and "zz_probe_system" in text

    def _probe_tool_role(self) -> bool:
        if self.family.tool_role is None:
            return False
        msgs = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
                {"role": self.family.tool_role, "content": "zz_probe_result", "tool_call_id": "zzprobe00"}]
        text = self._try(msgs, True)
        return text is not None and "zz_probe_result" in text

    def _renders_tools(self) -> bool:
        if self.family.tools_in_system:
            return True
        text = self._try([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], True, tools=[_PROBE_TOOL])
        return text is not None and "zz_probe_tool_name" in text

    def _check(self):
        """Fails now, before any rollout, where a tool-result or user turn cannot be appended after
        a sampled assistant turn from the template's own text."""
        for new in ([{"role": "tool", "tool_call_id": "c", "content": "zz_probe_result"}], [{"role": "user", "content": "zz_probe_result"}]):
            try:
                text = self._continuation_text(new, {})
            except Exception as e:  # noqa: BLE001
                self._fail(f"cannot render a {new[0]['role']} turn after an assistant turn: {e}")
            if "zz_probe_result" not in text:
                self._fail(f"drops a {new[0]['role']} turn that follows an assistant turn, so turns cannot be appended")

    # ---- rendering -------------------------------------------------------------------------------
    def _render(self, messages, add_generation_prompt: bool, tools=None) -> str:
        kw = {"tools": tools} if tools and self.template_renders_tools and not self.actions and not self.family.tools_in_system else {}
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                            **self.family.kwargs, **kw)

    def system_content(self, system_prompt: str, tools) -> str:
        if tools and self.actions:
            return f"{system_prompt}\n\n{_action_instructions(tools)}" if system_prompt else _action_instructions(tools)
        if not tools or self.template_renders_tools:
            return system_prompt
        return system_prompt + _TOOLS_HEADER.format(tools="\n".join(json.dumps(t) for t in tools))

    def _system_messages(self, system_prompt: str, tools, rest: list[dict]) -> list[dict]:
        """The system turn, or (a template without a system role, e.g. Gemma 2) its text at the top
        of the first user turn, as Gemma 3's template does it."""
        content = self.system_content(system_prompt, tools)
        if self._system_ok:
            sys = {"role": "system", "content": content}
            if tools and self.family.tools_in_system and not self.actions:
                sys["tools"] = json.dumps([t["function"] for t in tools], ensure_ascii=False)
            return [sys] + rest
        if not content:
            return rest
        if rest and rest[0]["role"] == "user":
            return [{**rest[0], "content": f"{content}\n\n{rest[0]['content']}"}] + rest[1:]
        return [{"role": "user", "content": content}] + rest

    def as_template_messages(self, messages, names: dict | None = None):
        """Messages as the template takes them: assistant tool calls as `tool_calls` where the
        template renders them itself, else as text in the family's syntax (or actions); tool
        results in the template's tool role, else as user turns. `names` maps the ids of calls
        made before `messages` to tool names."""
        out, names = [], dict(names or {})
        for m in messages:
            if m["role"] == "assistant":
                calls = m.get("tool_calls") or []
                names.update({c["id"]: c["function"]["name"] for c in calls})
                if calls and self.family.native_calls and not self.actions:
                    out.append({"role": "assistant", "content": m.get("content") or "",
                                "tool_calls": [self._native_call(c) for c in calls]})
                else:
                    out.append({"role": "assistant", "content": self.assistant_text(m)})
            elif m["role"] == "tool" and self.actions:
                cid = m.get("tool_call_id", "")
                out.append({"role": "user", "content": f"Result of tool call {names.get(cid, '')} ({cid}):\n{_tool_content(m)}"})
            elif m["role"] == "tool" and self._tool_ok:
                out.append({"role": self.family.tool_role, "content": _tool_content(m), "tool_call_id": self._call_id(m.get("tool_call_id", ""))})
            elif m["role"] == "tool":
                out.append({"role": "user", "content": _tool_content(m)})
            else:
                out.append({"role": m["role"], "content": m.get("content") or ""})
        if self.family.alternate:  # e.g. a tool result (a user turn here) followed by a user message
            merged: list[dict] = []
            for m in out:
                if merged and m["role"] == merged[-1]["role"] == "user":
                    merged[-1] = {**merged[-1], "content": merged[-1]["content"] + "\n\n" + m["content"]}
                else:
                    merged.append(m)
            out = merged
        return out

    def _call_id(self, cid: str) -> str:
        return mistral_id(cid) if self.family.calls.startswith("mistral") else cid

    def _native_call(self, c: dict) -> dict:
        return {"id": self._call_id(c.get("id", "")), "type": "function",
                "function": {"name": c["function"]["name"], "arguments": _arguments(c)}}

    def assistant_text(self, m) -> str:
        """The text of an assistant message in the family's own tool-call syntax: what the model
        writes, and (for templates that render tool calls) what the template writes for it."""
        if self.actions:
            return action_text(m)
        content, calls = m.get("content") or "", m.get("tool_calls") or []
        if not calls:
            return content
        syntax = self.family.calls
        if syntax == "llama3":  # the template writes the call alone
            c = calls[0]
            return _dumps({"name": c["function"]["name"], "parameters": _arguments(c)})
        if syntax == "mistral":
            return "[TOOL_CALLS]" + _dumps([{"name": c["function"]["name"], "arguments": _arguments(c), "id": self._call_id(c.get("id", ""))}
                                            for c in calls])
        if syntax == "mistral11":
            return "".join(f"[TOOL_CALLS]{c['function']['name']}[CALL_ID]{self._call_id(c.get('id', ''))}[ARGS]{_dumps(_arguments(c))}"
                           for c in calls)
        if syntax == "phi4":
            listed = _dumps([{"name": c["function"]["name"], "arguments": _arguments(c)} for c in calls])
            return "\n".join(p for p in (content, f"<|tool_call|>{listed}<|/tool_call|>") if p)
        parts = [content] + ["<tool_call>\n" + _dumps({"name": c["function"]["name"], "arguments": _arguments(c)}) + "\n</tool_call>"
                             for c in calls]
        return "\n".join(p for p in parts if p)

    def encode(self, text: str) -> list[int]:
        # Half a UTF-16 pair, which a generated env's JSON can hold ("\ud800": json.loads gives it
        # back alone), is U+FFFD as Node writes it: the tokenizer raises on it, and one tool result
        # or gold's words stopped training (found after rerun 46b).
        return self.tok.encode(_HALF_PAIR.sub("\ufffd", text), add_special_tokens=False)

    def prompt_ids(self, system_prompt: str, tools, messages) -> list[int]:
        """The opening prompt: system (with tools) + the episode's first messages + generation prompt."""
        msgs = self._system_messages(system_prompt, tools, self.as_template_messages(messages))
        return self.encode(self._render(msgs, True, tools))

    def _continuation_text(self, new_messages, names: dict) -> str:
        """What the template writes after an assistant turn's content when `new_messages` and a
        generation prompt follow it. Only the text after the (sentinel) content is used, so a
        template that writes the last assistant turn differently from earlier ones (Qwen3's empty
        think block) still appends exactly; system prompt and tools are left out because Mistral's
        templates move them to the last user turn."""
        base = [{"role": "user", "content": "U"}, {"role": "assistant", "content": _SENTINEL}]
        full = self._render(base + self.as_template_messages(new_messages, names), True)
        # The first: the new messages come after it, and an env's text may hold the letters too (rerun 48b).
        at = full.find(_SENTINEL)
        if at < 0:
            raise ValueError("the template does not write assistant content verbatim")
        return full[at + len(_SENTINEL):]

    def continuation_ids(self, new_messages, ended_with_stop: bool, after: dict | None = None) -> list[int]:
        """Ids that follow a sampled assistant turn (`after`, whose calls the new tool messages
        answer): terminator (if the sample was cut), glue, the new non-assistant messages and the
        next generation prompt, from the template's own text."""
        names = {c["id"]: c["function"]["name"] for c in (after or {}).get("tool_calls") or []}
        text = self._continuation_text(new_messages, names)
        if ended_with_stop and text.startswith(self.eos_text):
            text = text[len(self.eos_text):]
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
        """(content, tool_calls) of a sampled turn, in this format's syntax. A Qwen3 think block
        (thinking on) is reasoning, not content."""
        if self.actions:
            return parse_action(text, call_id)
        if "</think>" in text:
            text = text.split("</think>")[-1].lstrip("\n")
        return _PARSERS[self.family.calls](text, call_id)

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


def _dumps(obj) -> str:
    """JSON as the templates' `tojson` writes it (Hugging Face's: json.dumps, non-ASCII kept)."""
    return json.dumps(obj, ensure_ascii=False)


def _arguments(call: dict):
    """An OpenAI call's arguments (a JSON string) as the object the templates write."""
    args = call["function"].get("arguments")
    try:
        return json.loads(args) if isinstance(args, str) else (args if args is not None else {})
    except json.JSONDecodeError:
        return args


def mistral_id(cid: str) -> str:
    """Mistral's templates require call ids of 9 alphanumerics."""
    return cid if MISTRAL_ID_RE.fullmatch(cid or "") else hashlib.sha1((cid or "").encode()).hexdigest()[:9]


def _call(call_id: str, n: int, name: str, args) -> dict:
    return {"id": f"{call_id}_{n}", "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}}


def parse_assistant(text: str, call_id: str):
    """(content, tool_calls) of Hermes-style text (Qwen, and the generic format): each
    well-formed `<tool_call>` JSON becomes a call; text outside tool-call blocks is the content."""
    calls = []
    for match in TOOL_CALL_RE.finditer(text):
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            calls.append(_call(call_id, len(calls), obj["name"], obj.get("arguments", {})))
    content = TOOL_CALL_RE.sub("", text).strip()
    return content, calls


def parse_llama3(text: str, call_id: str):
    """Llama 3.1+ JSON tool calls: the turn is `{"name": ..., "parameters": {...}}` (after an
    optional `<|python_tag|>`); any text before the object is content."""
    body = text.replace("<|python_tag|>", "").strip()
    start = body.find("{")
    if start >= 0:
        try:
            obj, _ = json.JSONDecoder().raw_decode(body[start:])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("name"), str) and ("parameters" in obj or "arguments" in obj):
            args = obj["parameters"] if "parameters" in obj else obj["arguments"]
            return body[:start].strip(), [_call(call_id, 0, obj["name"], args)]
    return text.strip(), []


def _json_list(text: str):
    try:
        obj, _ = json.JSONDecoder().raw_decode(text.strip())
    except json.JSONDecodeError:
        return []
    return [x for x in (obj if isinstance(obj, list) else [obj]) if isinstance(x, dict)]


def parse_mistral(text: str, call_id: str):
    """Mistral v0.3 / Nemo: `[TOOL_CALLS]` then a JSON list of {name, arguments, id}; a sampled
    id of 9 alphanumerics is kept (the template writes it back), any other gets one."""
    head, sep, rest = text.partition("[TOOL_CALLS]")
    if not sep:
        return text.strip(), []
    calls = []
    for obj in _json_list(rest):
        if isinstance(obj.get("name"), str):
            c = _call(call_id, len(calls), obj["name"], obj.get("arguments", {}))
            c["id"] = obj["id"] if isinstance(obj.get("id"), str) and MISTRAL_ID_RE.fullmatch(obj["id"]) else mistral_id(c["id"])
            calls.append(c)
    return head.strip(), calls


MISTRAL11_CALL_RE = re.compile(r"\[TOOL_CALLS\]\s*([^\[\s]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9]+)\s*)?\[ARGS\]")


def parse_mistral11(text: str, call_id: str):
    """Mistral Small 3.1+/Magistral/Devstral (tokenizer v11+): `[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}`
    per call (`[CALL_ID]` optional); ids as in `parse_mistral`."""
    calls, head = [], None
    for m in MISTRAL11_CALL_RE.finditer(text):
        head = text[: m.start()] if head is None else head
        try:
            args, _ = json.JSONDecoder().raw_decode(text[m.end():].lstrip())
        except json.JSONDecodeError:
            continue
        c = _call(call_id, len(calls), m.group(1), args)
        c["id"] = m.group(2) if m.group(2) and MISTRAL_ID_RE.fullmatch(m.group(2)) else mistral_id(c["id"])
        calls.append(c)
    return (text if head is None else head).strip(), calls


def parse_phi4(text: str, call_id: str):
    """Phi-4-mini: `<|tool_call|>[{"name": ..., "arguments": {...}}]<|/tool_call|>` (vLLM's
    template for it writes `functools[...]`, also read); an OpenAI-shaped item is read too."""
    calls = []
    for match in PHI_CALL_RE.finditer(text):
        for obj in _json_list(match.group(1)):
            fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
            if isinstance(fn.get("name"), str):
                calls.append(_call(call_id, len(calls), fn["name"], fn.get("arguments", fn.get("parameters", {}))))
    return PHI_CALL_RE.sub("", text).strip(), calls


_PARSERS = {"hermes": parse_assistant, "llama3": parse_llama3, "mistral": parse_mistral, "mistral11": parse_mistral11, "phi4": parse_phi4}


@contextmanager
def env_text(where: str):
    """Renders an env's messages: a template that raises on them (two user turns in a row, reruns
    48b and 49b) fails the run once, naming the env's episode, where a retry fails the same way."""
    try:
        yield
    except TrainerError:
        raise
    except Exception as e:  # noqa: BLE001 — whatever the template raises, the env's text caused it
        raise TrainerError("EnvText", f"{where}: the model's chat template cannot render the env's messages "
                                      f"({type(e).__name__}: {str(e)[:200]})", retryable=False) from e
