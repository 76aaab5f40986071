"""An OpenAI-compatible chat-completions server (with tools) for the base model, base + one LoRA
adapter, or base + the LoRA-MoE gate, so evaluation uses one backend for every variant. It also
speaks the part of vLLM's API the GRPO trainer's policy_server uses: /v1/completions on token-id
prompts, with logprobs whose tokens can be given as "token_id:<n>", and, with --enable-lora,
runtime LoRA loading by name (/v1/load_lora_adapter, /v1/unload_lora_adapter), the request's
`model` naming the base or a loaded adapter."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from .chat import ChatFormat, uses_actions
from .events import emit
from .grammar import ActionGrammar, action_schema
from .sampler import sample
from .storage import Store


class NotFound(Exception):
    """A model or adapter name the server does not hold (HTTP 404, as vLLM answers)."""


class _Job:
    """One chat request waiting to be decoded: `run` decodes a batch of jobs that share its key."""

    def __init__(self, key, prompt: list[int], cap: int, run):
        self.key, self.prompt, self.cap, self.run = key, prompt, cap, run
        self.done = threading.Event()
        self.out: list[int] = []
        self.n = 0
        self.error: BaseException | None = None


class Batcher:
    """Decodes chat requests that are in flight together as one batch: at batch 1 a CPU decode step
    is bound by reading the weights, so 8 rows cost ~2.3× one row (bench/trainer-speed.py), and the
    shared system prompt and tools are prefilled once. A batch takes the oldest request and every
    queued one with the same key, after waiting up to `window_s` for others to arrive. Up to 32
    rows: an evaluation's 24 episodes in flight decode as one batch, and on SmolLM2 (CPU, 2 threads)
    a step of 24 rows costs ~1.4x one of 12 (10.6 s vs 7.4 s for the same turns)."""

    def __init__(self, max_batch: int = 32, window_s: float = 0.02):
        self.max_batch, self.window_s = max_batch, window_s
        self.queue: list[_Job] = []
        self.cond = threading.Condition()
        self.calls = 0
        self.sizes: list[int] = []  # batch sizes decoded so far (tests, logs)
        threading.Thread(target=self._loop, daemon=True, name="batcher").start()

    def submit(self, job: _Job) -> tuple[list[int], int]:
        """The job's sampled ids and its request number, once its batch has run."""
        with self.cond:
            self.queue.append(job)
            self.cond.notify_all()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.out, job.n

    def _take(self) -> list[_Job]:
        with self.cond:
            while not self.queue:
                self.cond.wait()
            key = self.queue[0].key
            deadline = time.monotonic() + self.window_s
            while sum(j.key == key for j in self.queue) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                self.cond.wait(left)
            batch = [j for j in self.queue if j.key == key][: self.max_batch]
            self.queue = [j for j in self.queue if j not in batch]
        return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            try:
                outs = batch[0].run(batch)
                for j, out in zip(batch, outs):
                    self.calls += 1
                    j.out, j.n = out, self.calls
                self.sizes.append(len(batch))
            except BaseException as e:  # noqa: BLE001 — every request of the batch answers with it
                for j in batch:
                    j.error = e
            finally:
                for j in batch:
                    j.done.set()


class Policy:
    """A loaded model variant; chat requests in flight together decode as one batch (`Batcher`),
    other requests one at a time. With `enable_lora`, LoRA adapters loaded at runtime are served
    beside it under their own names."""

    def __init__(self, model, tokenizer, name: str, *, enable_lora: bool = False, constrained_decoding: bool | str = False,
                 logprobs_mode: str = "raw_logprobs"):
        self.model, self.tok, self.name = model.eval(), tokenizer, name
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode: expected one of {', '.join(LOGPROBS_MODES)}, got {logprobs_mode!r}")
        # vLLM's --logprobs-mode: log-softmax of the raw logits, or of the tempered ones sampled from.
        self.logprobs_mode = logprobs_mode
        # With constrained decoding, chat requests with tools are answered under the action grammar
        # in the JSON action format, as the trainer samples them (grammar.py).
        self.constrained = uses_actions(constrained_decoding, tokenizer)
        self.fmt = ChatFormat(tokenizer, actions=self.constrained)
        self._thinking_fmt: ChatFormat | None = None
        self.grammars: dict[str, ActionGrammar] = {}
        self.lock = threading.Lock()
        self.calls = 0
        self.batcher = Batcher()
        self.enable_lora = enable_lora
        self.adapters: dict[str, str] = {}  # runtime-loaded adapter name -> path

    # ---- runtime LoRA adapters (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter) --------
    def load_adapter(self, body: dict) -> str:
        from peft import PeftModel

        if not self.enable_lora:
            raise ValueError("runtime LoRA loading is off: start serve with --enable-lora")
        name, path = body.get("lora_name"), body.get("lora_path")
        if not isinstance(name, str) or not name:
            raise ValueError("lora_name: expected a non-empty string")
        if not isinstance(path, str) or not os.path.isfile(os.path.join(path, "adapter_config.json")):
            raise ValueError(f"lora_path: no PEFT adapter (adapter_config.json) at {path!r}")
        with self.lock:
            if name == self.name or name in self.adapters:
                raise ValueError(f"lora_name: the lora adapter '{name}' has already been loaded")
            device = next(self.model.parameters()).device
            if self.adapters:
                self.model.load_adapter(path, adapter_name=name)
            else:
                self.model = PeftModel.from_pretrained(self.model, path, adapter_name=name)
            self.model.to(device).eval()
            self.adapters[name] = path
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, body: dict) -> str:
        name = body.get("lora_name")
        with self.lock:
            if name not in self.adapters:
                raise NotFound(f"the lora adapter '{name}' cannot be found")
            if len(self.adapters) == 1:
                # PEFT cannot delete a model's last adapter; unwrapping restores the plain base.
                self.model = self.model.unload().eval()
            else:
                self.model.delete_adapter(name)
            del self.adapters[name]
        return f"Success: LoRA adapter '{name}' removed successfully."

    def _grammar(self, schema: dict, compact: bool = True) -> ActionGrammar:
        """The compiled grammar of a JSON schema, compiled once per distinct schema; `compact`: with
        the policy's whitespace bias (chat), or the mask alone (vLLM's structured outputs)."""
        key = json.dumps([schema, compact], sort_keys=True)
        if key not in self.grammars:
            try:
                self.grammars[key] = ActionGrammar(self.tok, schema, self.fmt.terminator_id, self.model.config.vocab_size,
                                                   compact=compact)
            except Exception as e:  # noqa: BLE001 — xgrammar's own message names what it cannot compile
                raise ValueError(f"structured_outputs.json: cannot compile the schema: {e}") from e
        return self.grammars[key]

    def models(self) -> list[dict]:
        base = {"id": self.name, "object": "model", "owned_by": "trace"}
        return [base] + [{"id": n, "object": "model", "owned_by": "trace", "root": p, "parent": self.name} for n, p in self.adapters.items()]

    def _use(self, model_name):
        """The weights a request names (caller holds the lock): a runtime-loaded adapter, else the
        served variant, with any runtime adapters switched off."""
        if model_name in self.adapters:
            self.model.set_adapter(model_name)
            return contextlib.nullcontext()
        return self.model.disable_adapter() if self.adapters else contextlib.nullcontext()

    def complete(self, body: dict) -> dict:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("messages: expected a non-empty list")
        if body.get("stream"):
            raise ValueError("stream: not supported")
        if body.get("n", 1) != 1:
            raise ValueError("n: only 1 is supported")
        tools = body.get("tools") or []
        system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
        rest = msgs[1:] if msgs[0]["role"] == "system" else msgs
        fmt = self._format(body)
        prompt = fmt.prompt_ids(system, tools, rest)
        temperature = float(body.get("temperature", 1.0))
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 512)
        schema = action_schema(tools) if tools and self.constrained else None
        grammar = self._grammar(schema) if schema else None
        seed = body.get("seed")
        # Requests for the same weights, grammar and temperature decode together; a seeded sampled
        # request runs alone so that its seed alone decides its draws.
        key = (body.get("model"), json.dumps(schema, sort_keys=True), temperature) if seed is None or temperature == 0 else object()

        def run(jobs: list[_Job]) -> list[list[int]]:
            with self.lock, self._use(body.get("model")):
                if seed is not None:
                    torch.manual_seed(int(seed))
                return sample(self.model, [j.prompt for j in jobs], max_new_tokens=[j.cap for j in jobs], temperature=temperature,
                              stop_ids=fmt.stop_ids, pad_id=self.tok.pad_token_id, grammar=grammar).ids

        out, n = self.batcher.submit(_Job(key, prompt, max_tokens, run))
        text, ended = fmt.decode_sample(out)
        content, calls = fmt.parse(text, f"call_{n}") if tools else (text.strip(), [])
        message = {"role": "assistant", "content": content or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop" if ended else "length"
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": self.name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out), "total_tokens": len(prompt) + len(out)}}

    def _format(self, body: dict) -> ChatFormat:
        """The chat format of a request: Qwen3's thinking on where it asks for it as vLLM takes it
        (`chat_template_kwargs.enable_thinking`); off, the instruct default, otherwise."""
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ValueError("chat_template_kwargs: expected an object")
        if not kwargs.get("enable_thinking"):
            return self.fmt
        if self._thinking_fmt is None:
            self._thinking_fmt = ChatFormat(self.tok, actions=self.constrained, thinking=True)
        return self._thinking_fmt

    # ---- /v1/completions on token ids -----------------------------------------------------------
    def completion(self, body: dict) -> dict:
        """Samples softmax(logits / T) as the trainer does (no top-k/top-p); stops at the tokenizer's
        EOS or any of `stop_token_ids` (the stop token is part of the sample). Logprobs are the
        model's own log-softmax (before temperature), as vLLM reports them by default, or with
        `logprobs_mode` "processed_logprobs" those of the tempered distribution sampled from."""
        prompts = _token_prompts(body.get("prompt"), len(self.tok))
        for key, allowed in _NEUTRAL.items():
            if body.get(key) not in allowed:
                raise ValueError(f"{key}: {body[key]!r} is not supported (allowed: {', '.join(map(repr, allowed))})")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens: expected a positive integer, got {max_tokens!r}")
        temperature = float(body.get("temperature", 1.0))
        k = body.get("logprobs")
        if k is not None and (not isinstance(k, int) or k < 0):
            raise ValueError(f"logprobs: expected a non-negative integer, got {k!r}")
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        extra_stop = body.get("stop_token_ids") or []
        if not isinstance(extra_stop, list) or not all(isinstance(t, int) for t in extra_stop):
            raise ValueError("stop_token_ids: expected a list of integers")
        stop = set(extra_stop) | ({self.tok.eos_token_id} if self.tok.eos_token_id is not None else set())
        # vLLM's structured outputs (`structured_outputs.json`; older servers: `guided_json`).
        schema = (body.get("structured_outputs") or {}).get("json") or body.get("guided_json")
        if schema is not None and not isinstance(schema, dict):
            raise ValueError("structured_outputs.json: expected a JSON schema object")
        grammar = self._grammar(schema, compact=False) if schema is not None else None
        bias = _logit_bias(body.get("logit_bias"), self.model.config.vocab_size)
        model_name = body.get("model") or self.name
        with self.lock:
            if model_name != self.name and model_name not in self.adapters:
                raise NotFound(f"the model `{model_name}` does not exist")
            generator = None
            if body.get("seed") is not None:
                generator = torch.Generator(device=next(self.model.parameters()).device).manual_seed(int(body["seed"]))
            with self._use(model_name), torch.no_grad():
                outs = sample(self.model, prompts, max_new_tokens=max_tokens, temperature=temperature, stop_ids=stop,
                              pad_id=self.tok.pad_token_id, generator=generator, grammar=grammar, logit_bias=bias).ids
                scale = temperature if self.logprobs_mode == "processed_logprobs" and temperature > 0 else 1.0
                lps = [self._logprobs(p, o, k, as_ids, scale) for p, o in zip(prompts, outs)] if k is not None else [None] * len(outs)
            self.calls += 1
            n = self.calls
        choices = []
        for i, (out, lp) in enumerate(zip(outs, lps)):
            stopped = bool(out) and out[-1] in stop
            choices.append({"index": i, "text": self.tok.decode(out, skip_special_tokens=True), "logprobs": lp,
                            "finish_reason": "stop" if stopped else "length",
                            "stop_reason": out[-1] if stopped and out[-1] in extra_stop else None})
        used = sum(len(o) for o in outs)
        return {"id": f"cmpl-{n}", "object": "text_completion", "created": int(time.time()), "model": model_name, "choices": choices,
                "usage": {"prompt_tokens": sum(map(len, prompts)), "completion_tokens": used, "total_tokens": sum(map(len, prompts)) + used}}

    def _logprobs(self, prompt: list[int], out: list[int], k: int, as_ids: bool, temperature: float = 1.0) -> dict:
        device = next(self.model.parameters()).device
        logits = self.model(input_ids=torch.tensor([prompt + out], device=device)).logits[0, len(prompt) - 1: -1].float() / temperature
        lp = torch.log_softmax(logits, dim=-1)
        name = (lambda t: f"token_id:{t}") if as_ids else (lambda t: self.tok.decode([t]))
        tokens = [name(t) for t in out]
        chosen = [float(lp[i, t]) for i, t in enumerate(out)]
        top = []
        for i, t in enumerate(out):
            entry = {name(int(j)): float(v) for v, j in zip(*lp[i].topk(k))} if k else {}
            entry[tokens[i]] = chosen[i]
            top.append(entry)
        offsets, at = [], 0
        for t in out:
            offsets.append(at)
            at += len(self.tok.decode([t]))
        return {"tokens": tokens, "token_logprobs": chosen, "top_logprobs": top, "text_offset": offsets}


LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")

# Completion options this server does not implement, and the values that mean "off": sampling is
# always one softmax(logits / temperature) draw per prompt, as in the trainer.
_NEUTRAL = {"stream": (None, False), "echo": (None, False), "suffix": (None,), "n": (None, 1), "best_of": (None, 1),
            "top_p": (None, 1), "top_k": (None, -1, 0), "min_p": (None, 0), "repetition_penalty": (None, 1)}


def _logit_bias(value, vocab: int) -> torch.Tensor | None:
    """vLLM's `logit_bias` (token id -> offset added to its logit, clamped to [-100, 100]) as a [V] vector."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("logit_bias: expected an object of token id -> bias")
    bias = torch.zeros(vocab)
    for k, v in value.items():
        if not str(k).isdigit() or int(k) >= vocab or isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"logit_bias: {k!r}: {v!r} is not a token id below {vocab} with a numeric bias")
        bias[int(k)] = max(-100.0, min(100.0, float(v)))
    return bias


def _token_prompts(prompt, vocab: int) -> list[list[int]]:
    """A token-id prompt (list of ints) or a batch of them; the trainer never sends text."""
    batch = [prompt] if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt) else prompt
    if not isinstance(batch, list) or not batch or not all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in batch):
        raise ValueError("prompt: expected token ids (a non-empty list of integers, or a list of such lists)")
    bad = next((t for p in batch for t in p if not 0 <= t < vocab), None)
    if bad is not None:
        raise ValueError(f"prompt: token id {bad} is outside the vocabulary (size {vocab})")
    return batch


def load_policy(model: str, *, tokenizer: str | None = None, adapter: str | None = None, gate: str | None = None,
                name: str | None = None, device: str = "auto", store: Store | None = None, enable_lora: bool = False,
                constrained_decoding: bool | str = False, logprobs_mode: str = "raw_logprobs") -> Policy:
    from .model import load_base, load_tokenizer, pick_device, pick_dtype

    if adapter and gate:
        raise ValueError("serve: give --adapter or --gate, not both")
    if enable_lora and (adapter or gate):
        raise ValueError("serve: --enable-lora serves runtime adapters over the base model; give no --adapter or --gate")
    store = store or Store()
    dev = pick_device(device)
    tok = load_tokenizer(tokenizer or model)
    ChatFormat(tok)  # a chat template the server cannot use fails before the weights load
    base = load_base(model, dev, pick_dtype("auto", dev))
    if adapter:
        from peft import PeftModel

        with tempfile.TemporaryDirectory() as tmp:
            base = PeftModel.from_pretrained(base, store.get_dir(adapter, tmp)).to(dev)
    elif gate:
        from .moe import load_gate

        load_gate(base, store, gate)
    variant = "adapter" if adapter else "gate" if gate else "base"
    return Policy(base, tok, name or f"trace-{variant}", enable_lora=enable_lora, constrained_decoding=constrained_decoding,
                  logprobs_mode=logprobs_mode)


def make_server(policy: Policy, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body):
            text = isinstance(body, str)  # vLLM answers the LoRA endpoints with plain text
            data = body.encode() if text else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain; charset=utf-8" if text else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                with policy.lock:
                    data = policy.models()
                return self._send(200, {"object": "list", "data": data})
            self._send(404, {"error": {"type": "not_found", "message": f"no endpoint {self.path}"}})

        def do_POST(self):
            routes = {"/v1/chat/completions": policy.complete, "/v1/completions": policy.completion,
                      "/v1/load_lora_adapter": policy.load_adapter, "/v1/unload_lora_adapter": policy.unload_adapter}
            route = routes.get(self.path.rstrip("/"))
            if route is None:
                return self._send(404, {"error": {"type": "not_found", "message": f"no endpoint {self.path}"}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                if not isinstance(body, dict):
                    raise ValueError("body: expected a JSON object")
                self._send(200, route(body))
            except NotFound as e:
                self._send(404, {"error": {"type": "NotFoundError", "message": str(e)}})
            except (ValueError, KeyError, TypeError) as e:
                self._send(400, {"error": {"type": "invalid_request_error", "message": str(e)}})
            except Exception as e:  # noqa: BLE001 — a failed generation is a 500, the server stays up
                self._send(500, {"error": {"type": "server_error", "message": str(e)}})

    return ThreadingHTTPServer((host, port), Handler)


def serve(*, model: str, tokenizer: str | None, adapter: str | None, gate: str | None, host: str, port: int, name: str | None,
          device: str, enable_lora: bool = False, constrained_decoding: bool | str = False, logprobs_mode: str = "raw_logprobs") -> None:
    policy = load_policy(model, tokenizer=tokenizer, adapter=adapter, gate=gate, name=name, device=device, enable_lora=enable_lora,
                         constrained_decoding=constrained_decoding, logprobs_mode=logprobs_mode)
    server = make_server(policy, host, port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    emit("listening", url=f"http://{host}:{server.server_address[1]}/v1", model=policy.name)
    try:
        server.serve_forever()
    finally:
        server.server_close()
