"""Rollouts through an OpenAI-compatible policy server with runtime LoRA loading: vLLM started with
--enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or `python -m trace_trainer serve
--enable-lora`. Before each rollout phase the trainer writes its current adapter (PEFT layout)
under a versioned name, loads it (POST /v1/load_lora_adapter) and unloads the previous version, so
rollouts stay on-policy. Sampling sends the prompt as token ids to /v1/completions and reads the
sampled ids back from the logprobs (return_tokens_as_token_ids), so nothing is re-tokenized."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .config import PolicyServerConfig
from .events import ConfigError, TrainerError
from .sampler import Samples

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
# Spelled out so a server's defaults (vLLM applies the model's generation_config.json) cannot
# truncate the distribution: the trainer's ratios assume plain softmax(logits / temperature) samples.
PLAIN_SAMPLING = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
# Requests in flight at once: the server batches them; one request per prompt keeps each its own seed.
MAX_IN_FLIGHT = 64


class PolicyServer:
    def __init__(self, cfg: PolicyServerConfig, prefix: str):
        self.cfg, self.prefix = cfg, prefix
        base = cfg.base_url.rstrip("/")
        self.base = base[: -len("/v1")] if base.endswith("/v1") else base
        self.local_dir = Path(cfg.lora_dir).resolve()
        self.server_dir = cfg.server_lora_dir or str(self.local_dir)
        self.headers = {"content-type": "application/json"}
        if cfg.api_key_env:
            key = os.environ.get(cfg.api_key_env)
            if not key:
                raise ConfigError(f"policy_server.api_key_env: environment variable {cfg.api_key_env} is not set")
            self.headers["authorization"] = f"Bearer {key}"
        self.current: str | None = None
        self.version: int | None = None

    def _post(self, path: str, body: dict):
        """(status, parsed body); vLLM answers the LoRA endpoints with plain text, completions with JSON."""
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as res:
                status, raw = res.status, res.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            raise TrainerError("PolicyServerUnavailable", f"policy server POST {path}: {e}", retryable=True) from e
        try:
            return status, json.loads(raw)
        except json.JSONDecodeError:
            return status, raw.decode(errors="replace")

    def _fail(self, path: str, status: int, out) -> TrainerError:
        err = out.get("error", out) if isinstance(out, dict) else out  # vLLM has used both {"error": {...}} and a flat object
        msg = err.get("message", err) if isinstance(err, dict) else err
        hint = " (is runtime LoRA loading on: vLLM --enable-lora with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or serve --enable-lora?)" \
            if "lora" in path else ""
        # A 4xx is a request this server refuses: retrying the same trainer cannot help.
        return TrainerError("PolicyServerRejected" if status < 500 else "PolicyServerError",
                            f"policy server POST {path}: HTTP {status}: {msg}{hint}", retryable=status >= 500)

    def publish(self, model, version: int) -> str:
        """Serves `model`'s adapter as `<prefix>-v<version>` (no-op when that version is already served)."""
        if self.version == version:
            return self.current
        name = f"{self.prefix}-v{version}"
        local = self.local_dir / name
        shutil.rmtree(local, ignore_errors=True)
        model.save_pretrained(str(local))
        if self.current is None:
            # A retry of a trainer killed without cleanup may have left this name loaded; replace it.
            self._post("/v1/unload_lora_adapter", {"lora_name": name})
        status, out = self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": f"{self.server_dir.rstrip('/')}/{name}"})
        if status != 200:
            raise self._fail("/v1/load_lora_adapter", status, out)
        self._retire()
        self.current, self.version = name, version
        return name

    def _retire(self) -> None:
        if self.current is None:
            return
        status, out = self._post("/v1/unload_lora_adapter", {"lora_name": self.current})
        if status != 200:  # training goes on; a stale version only takes a slot on the server
            print(f"[trace_trainer] {self._fail('/v1/unload_lora_adapter', status, out)}", file=sys.stderr, flush=True)
        shutil.rmtree(self.local_dir / self.current, ignore_errors=True)
        self.current = self.version = None

    def close(self) -> None:
        """Unloads the served version so a finished trainer leaves no adapter slot taken; runs on the
        way out of any failure too, so its own failure is only logged."""
        try:
            self._retire()
        except TrainerError as e:
            print(f"[trace_trainer] {e}", file=sys.stderr, flush=True)

    def sampler(self, fmt, temperature: float, seeds: random.Random):
        """The rollout generator over the served version; each prompt's request carries a seed drawn
        from `seeds` (in prompt order), so a run is reproducible against a deterministic server.
        Under an action grammar the request carries its schema as vLLM's `structured_outputs` and
        its whitespace bias as `logit_bias`, so vLLM samples what the in-process sampler would."""
        def generate(prompts: list[list[int]], max_new_tokens: list[int], grammar=None) -> Samples:
            guided = {"structured_outputs": {"json": grammar.schema}, "logit_bias": grammar.logit_bias()} if grammar else {}
            bodies = [{"model": self.current, "prompt": p, "max_tokens": cap, "temperature": temperature, **PLAIN_SAMPLING,
                       "stop_token_ids": list(fmt.stop_ids), "logprobs": 0, "return_tokens_as_token_ids": True,
                       "seed": seeds.randrange(2**31), **guided} for p, cap in zip(prompts, max_new_tokens)]
            with ThreadPoolExecutor(max_workers=min(MAX_IN_FLIGHT, len(bodies))) as pool:
                done = list(pool.map(lambda b: self._complete(b, b["max_tokens"]), bodies))
            return Samples([ids for ids, _ in done], [lps for _, lps in done])
        return generate

    def _complete(self, body: dict, max_new_tokens: int) -> tuple[list[int], list[float]]:
        status, out = self._post("/v1/completions", body)
        if status != 200:
            raise self._fail("/v1/completions", status, out)
        try:
            tokens = out["choices"][0]["logprobs"]["tokens"]
        except (KeyError, IndexError, TypeError) as e:
            raise TrainerError("PolicyServerProtocol", f"policy server /v1/completions: no choices[0].logprobs.tokens in the answer ({e!r})",
                               retryable=False) from e
        ids = []
        for i, t in enumerate(tokens):
            m = _TOKEN_ID.match(t) if isinstance(t, str) else None
            if m is None:
                raise TrainerError("PolicyServerProtocol", f"policy server /v1/completions: logprobs.tokens[{i}] is {t!r}, not 'token_id:<n>' "
                                   "(does the server honour return_tokens_as_token_ids?)", retryable=False)
            ids.append(int(m.group(1)))
        if not ids or len(ids) > max_new_tokens:
            raise TrainerError("PolicyServerProtocol", f"policy server /v1/completions: {len(ids)} sampled tokens for max_tokens={max_new_tokens}",
                               retryable=False)
        lps = out["choices"][0]["logprobs"].get("token_logprobs") or []
        return ids, [float(x) for x in lps] if len(lps) == len(ids) else []
