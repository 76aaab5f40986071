"""Structured decoding of agent actions: every assistant turn is one JSON action, a message or a
call to one of the env's tools with schema-valid arguments, then the template's turn terminator.
The schema is the one the embedded LLM server decodes under (infra/llm/chat-prompt.ts) and the one
sent to vLLM as `structured_outputs`, so every backend samples the same constrained policy.
xgrammar (vLLM's structured-output backend) turns it into a token mask at every step; the mask of
a sampled turn is recomputed deterministically by replaying the matcher over its ids, so training
scores exactly the distribution that was sampled."""
from __future__ import annotations

import json

import torch

_BITS = torch.arange(32, dtype=torch.int32)
# Logit added to whitespace-only tokens under a grammar, as the embedded server adds it
# (infra/llm/engine.ts): JSON admits free whitespace, which small models overuse. Both backends
# then admit the same strings and prefer the same compact ones (`{ "type": ...` as often as
# `{"type": ...`); forbidding the whitespace instead moves SmolLM2 from a tool call to a message
# on 24 of 24 showcase test tasks.
WHITESPACE_BIAS = -8.0
_WHITESPACE: dict[tuple[int, int], list[int]] = {}


def whitespace_tokens(tokenizer, vocab_size: int) -> list[int]:
    """Ids whose text is whitespace only (spaces, newlines, tabs), as the embedded server finds them."""
    key = (id(tokenizer), vocab_size)
    if key not in _WHITESPACE:
        n = min(vocab_size, len(tokenizer))
        texts = tokenizer.batch_decode([[t] for t in range(n)])
        _WHITESPACE[key] = [t for t, text in enumerate(texts) if text and not text.strip()]
    return _WHITESPACE[key]


# Nodes (dicts and lists) a tool's inlined parameters may have: $refs fan out, so a 2 KB schema
# can stand for billions ("billion laughs"); the largest real tool schema here has a few dozen.
MAX_SCHEMA_NODES = 20_000
# Characters of names and strings they may inline to: 60,000 one-character enum members reached
# 3,600 times through $refs were 206 MiB of schema (rerun 42b).
MAX_SCHEMA_CHARS = 1 << 20
# Nesting of dicts and lists (well inside Python's recursion limit).
MAX_SCHEMA_DEPTH = 100


# Keywords whose values are data, not schemas: copied as they are (a `$ref` inside an enum member is a value).
_DATA = ("enum", "const", "default", "examples")


def _inline_refs(node, root: dict, seen: tuple = (), budget: list | None = None, depth: int = 0, keyword: bool = True):
    """The schema with its local `#/$defs/X` (or `#/definitions/X`) references replaced by their
    definitions in that container of `root`: a tool's parameters move under the action schema, where
    its root refs would not resolve. `$defs`/`definitions` are dropped where they are keywords (not
    where `properties` names a property so: `keyword` is False for a properties map).
    Refused past MAX_SCHEMA_NODES inlined values (every value counts: a `required` name, an enum
    member) or MAX_SCHEMA_DEPTH levels."""
    budget = [MAX_SCHEMA_NODES, MAX_SCHEMA_CHARS] if budget is None else budget
    _charge(budget, node)
    if not isinstance(node, (list, dict)):
        return node
    if depth > MAX_SCHEMA_DEPTH:
        raise ValueError(f"tool parameters: nest deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(node, list):
        return [_inline_refs(v, root, seen, budget, depth + 1) for v in node]
    ref = node.get("$ref") if keyword else None
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        _, container, name = ref.split("/", 2)
        defs = root.get(container)
        if not isinstance(defs, dict) or name not in defs:
            raise ValueError(f"tool parameters: $ref {ref} has no definition")
        if ref in seen:
            raise ValueError(f"tool parameters: $ref {ref} is recursive, which the action grammar cannot inline")
        target = defs[name]
        if target is True:
            target = {}
        if not isinstance(target, dict):
            raise ValueError(f"tool parameters: $ref {ref} is not a schema object")
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline_refs(target, root, seen + (ref,), budget, depth + 1),
                **_inline_refs(rest, root, seen, budget, depth + 1)}
    return {k: _data(v, budget) if keyword and k in _DATA else _inline_refs(v, root, seen, budget, depth + 1,
                                                                         keyword=not (keyword and k == "properties"))
            for k, v in node.items() if not (keyword and k in ("$defs", "definitions"))}


def _charge(budget: list, value) -> None:
    """One node, and the characters of a string or of a dict's keys."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(f"tool parameters: expand to more than {MAX_SCHEMA_NODES} schema nodes through $refs")
    if isinstance(value, str):
        budget[1] -= len(value)
    elif isinstance(value, dict):
        budget[1] -= sum(len(k) for k in value)
    if budget[1] < 0:
        raise ValueError(f"tool parameters: expand to more than {MAX_SCHEMA_CHARS} characters of names and strings through $refs")


def _data(value, budget: list):
    """A data value as it is, each of its values counted: an enum or a `required` list reached
    through many $refs is as many nodes in the grammar (rerun 41b: 14,000 names 4,900 times)."""
    stack = [value]
    while stack:
        v = stack.pop()
        _charge(budget, v)
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return value


def _parameters(tool: dict) -> dict:
    params = tool["function"].get("parameters") or {"type": "object"}
    return _inline_refs(params, params)


def action_schema(tools: list[dict]) -> dict:
    """A message or one call per tool (properties in this order: type first, then the rest)."""
    calls = [{
        "type": "object",
        "properties": {
            "type": {"const": "tool_call"},
            "name": {"const": t["function"]["name"]},
            "arguments": _parameters(t),
        },
        "required": ["type", "name", "arguments"],
    } for t in tools]
    message = {"type": "object", "properties": {"type": {"const": "message"}, "content": {"type": "string"}},
               "required": ["type", "content"]}
    # anyOf, not oneOf: the branches are disjoint by their const fields, which xgrammar cannot prove (it warns and uses anyOf).
    return {"anyOf": [message, *calls]}


def parse_action(text: str, call_id: str) -> tuple[str, list[dict]]:
    """(content, tool_calls) of a JSON action; text that is no complete action (a cut sample) is a
    plain message, as the embedded server treats it."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return text.strip(), []
    if isinstance(obj, dict) and obj.get("type") == "tool_call" and isinstance(obj.get("name"), str):
        return "", [{"id": f"{call_id}_0", "type": "function",
                     "function": {"name": obj["name"], "arguments": json.dumps(obj.get("arguments", {}))}}]
    if isinstance(obj, dict) and obj.get("type") == "message":
        content = obj.get("content")
        return content if isinstance(content, str) else json.dumps(content), []
    return text.strip(), []


def action_text(message: dict) -> str:
    """An earlier assistant turn written as the action the grammar would have produced."""
    calls = message.get("tool_calls") or []
    if not calls:
        return json.dumps({"type": "message", "content": message.get("content") or ""})
    parts = []
    for c in calls:
        try:
            args = json.loads(c["function"]["arguments"] or "{}")
        except (json.JSONDecodeError, TypeError):
            args = c["function"]["arguments"]
        parts.append(json.dumps({"type": "tool_call", "name": c["function"]["name"], "arguments": args}))
    return "\n".join(parts)


def unpack(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """xgrammar's int32 bitmask [N, ceil(V/32)] (bit j of word i = token 32i+j allowed) as bool [N, V]."""
    bits = (bitmask.unsqueeze(-1) >> _BITS) & 1
    return bits.view(bitmask.shape[0], -1)[:, :vocab_size].bool()


class ActionGrammar:
    """A compiled JSON-schema grammar (the action schema of one tool set, or a request's
    `structured_outputs.json`); `matcher()` per sampled turn. `compact` adds WHITESPACE_BIAS to
    whitespace-only tokens (the policy's decoding rule); vLLM's structured outputs are the mask
    alone, and the bias then travels as the request's `logit_bias`."""

    def __init__(self, tokenizer, schema: dict, terminator_id: int, vocab_size: int, *, compact: bool = True):
        import xgrammar as xgr

        self._xgr = xgr
        self.vocab_size = vocab_size
        self.schema = schema
        # The grammar's end hands over to the template's turn terminator and to nothing else.
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=[terminator_id])
        # One thread: compiling a small schema is fast and the trainer's cores are for the model.
        compiler = xgr.GrammarCompiler(info, max_threads=1)
        # Free whitespace, as the embedded server's grammar has it; the bias keeps it rare.
        self.compiled = compiler.compile_json_schema(self.schema, any_whitespace=True)
        self.bias: torch.Tensor | None = None
        if compact:
            self.bias = torch.zeros(vocab_size)
            self.bias[whitespace_tokens(tokenizer, vocab_size)] = WHITESPACE_BIAS

    def logit_bias(self) -> dict[str, float]:
        """The bias as an OpenAI/vLLM `logit_bias` map (token id -> logit offset)."""
        if self.bias is None:
            return {}
        return {str(t): float(self.bias[t]) for t in self.bias.nonzero(as_tuple=True)[0].tolist()}

    def constrain(self, logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Logits [N, >=V] of N positions under the grammar: disallowed tokens at -inf, the bias added."""
        out = logits[:, : self.vocab_size].masked_fill(~allowed, float("-inf"))
        return out if self.bias is None else out + self.bias.to(out.device)

    def matcher(self):
        return self._xgr.GrammarMatcher(self.compiled)

    def new_bitmask(self, n: int) -> torch.Tensor:
        return self._xgr.allocate_token_bitmask(n, self.vocab_size)

    def allowed(self, sampled: list[int]) -> torch.Tensor:
        """bool [len(sampled), V]: the tokens the grammar allowed at each step of one sampled turn."""
        m, bm = self.matcher(), self.new_bitmask(max(len(sampled), 1))
        for i, t in enumerate(sampled):
            m.fill_next_token_bitmask(bm, i)
            if not m.accept_token(t):
                raise ValueError(f"sampled token {t} at step {i} is not allowed by the action grammar")
        return unpack(bm[: len(sampled)], self.vocab_size)
