"""An OpenAI-compatible chat-completions server (with tools) for the base model, base + one LoRA
adapter, or base + the LoRA-MoE gate, so evaluation uses one backend for every variant."""
from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from .chat import ChatFormat, parse_assistant
from .events import emit
from .sampler import sample
from .storage import Store


class Policy:
    """A loaded model variant that answers chat-completion requests one at a time."""

    def __init__(self, model, tokenizer, name: str):
        self.model, self.tok, self.name = model.eval(), tokenizer, name
        self.fmt = ChatFormat(tokenizer)
        self.lock = threading.Lock()
        self.calls = 0

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
        prompt = self.fmt.prompt_ids(system, tools, rest)
        temperature = float(body.get("temperature", 1.0))
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 512)
        with self.lock:
            if body.get("seed") is not None:
                torch.manual_seed(int(body["seed"]))
            [out] = sample(self.model, [prompt], max_new_tokens=max_tokens, temperature=temperature,
                           stop_ids=self.fmt.stop_ids, pad_id=self.tok.pad_token_id)
            self.calls += 1
            n = self.calls
        text, ended = self.fmt.decode_sample(out)
        content, calls = parse_assistant(text, f"call_{n}") if tools else (text.strip(), [])
        message = {"role": "assistant", "content": content or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop" if ended else "length"
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": self.name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out), "total_tokens": len(prompt) + len(out)}}


def load_policy(model: str, *, tokenizer: str | None = None, adapter: str | None = None, gate: str | None = None,
                name: str | None = None, device: str = "auto", store: Store | None = None) -> Policy:
    from .model import load_base, load_tokenizer, pick_device, pick_dtype

    if adapter and gate:
        raise ValueError("serve: give --adapter or --gate, not both")
    store = store or Store()
    dev = pick_device(device)
    tok = load_tokenizer(tokenizer or model)
    base = load_base(model, dev, pick_dtype("auto", dev))
    if adapter:
        from peft import PeftModel

        with tempfile.TemporaryDirectory() as tmp:
            base = PeftModel.from_pretrained(base, store.get_dir(adapter, tmp)).to(dev)
    elif gate:
        from .gate import load_gate

        load_gate(base, store, gate)
    variant = "adapter" if adapter else "gate" if gate else "base"
    return Policy(base, tok, name or f"trace-{variant}")


def make_server(policy: Policy, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": policy.name, "object": "model", "owned_by": "trace"}]})
            self._send(404, {"error": {"type": "not_found", "message": f"no endpoint {self.path}"}})

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"type": "not_found", "message": f"no endpoint {self.path}"}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                self._send(200, policy.complete(body))
            except (ValueError, KeyError, TypeError) as e:
                self._send(400, {"error": {"type": "invalid_request_error", "message": str(e)}})
            except Exception as e:  # noqa: BLE001 — a failed generation is a 500, the server stays up
                self._send(500, {"error": {"type": "server_error", "message": str(e)}})

    return ThreadingHTTPServer((host, port), Handler)


def serve(*, model: str, tokenizer: str | None, adapter: str | None, gate: str | None, host: str, port: int, name: str | None,
          device: str) -> None:
    policy = load_policy(model, tokenizer=tokenizer, adapter=adapter, gate=gate, name=name, device=device)
    server = make_server(policy, host, port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    emit("listening", url=f"http://{host}:{server.server_address[1]}/v1", model=policy.name)
    try:
        server.serve_forever()
    finally:
        server.server_close()
