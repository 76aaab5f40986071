"""Trainer configs (JSON files written by the TypeScript activity), validated with one-line errors
that name the bad field. Defaults follow the TRACE paper and its official code."""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path

from .events import ConfigError


@dataclass
class LoraConfig:
    r: int = 16  # rank of each adapter's A (r × d_in) and B (d_out × r)
    alpha: int = 16  # scale: the update is (alpha / r) · B A
    dropout: float = 0.0  # dropout on the LoRA input (the paper's code: none)
    # PEFT's "all-linear": every attention and MLP projection, never the output head.
    target_modules: typing.Union[str, list] = "all-linear"


@dataclass
class S3Config:
    endpoint: typing.Optional[str] = None  # S3-compatible endpoint URL (None = AWS)
    region: str = "us-east-1"
    force_path_style: bool = False  # bucket in the path, as MinIO-style servers need


@dataclass
class PolicyServerConfig:
    """An OpenAI-compatible vLLM server started with --enable-lora (and
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), or `python -m trace_trainer serve --enable-lora`."""
    base_url: str
    # Where the trainer writes each adapter version (PEFT layout); the server must be able to read it.
    lora_dir: str
    # The same directory as the server sees it, when it is mounted elsewhere there (default: lora_dir).
    server_lora_dir: typing.Optional[str] = None
    # Name of the environment variable holding the API key, so no secret sits in a config file.
    api_key_env: typing.Optional[str] = None
    timeout_s: float = 600.0  # per request; a batch of long rollouts can take minutes
    # What the server's token log-probs are of: "raw", log-softmax(logits) (vLLM's default,
    # --logprobs-mode raw_logprobs), or "processed", the tempered distribution it sampled from
    # (--logprobs-mode processed_logprobs). They are the sampling policy only at temperature 1 when raw.
    logprobs: str = "raw"


@dataclass
class GrpoConfig:
    model: str  # base model: HF id, local HF directory or GGUF file
    env_url: str  # the env protocol server of the capability environment
    output_uri: str  # where checkpoints, the adapter and trajectories go (local path or s3://)
    tokenizer: typing.Optional[str] = None  # default: the model's own
    lora: LoraConfig = field(default_factory=LoraConfig)
    # A PEFT adapter directory (local path or s3://) the LoRA weights start from: scheduled
    # retraining continues the previous run's adapter (fresh optimizer, iteration 0). --resume wins.
    init_adapter_uri: typing.Optional[str] = None
    iterations: int = 40  # GRPO updates (the paper: 40)
    groups: int = 4  # seeds (or tasks) per iteration
    rollouts_per_group: int = 16  # samples per seed; advantages are normalised within a group
    # Sampling temperature; the update scores softmax(logits / T), so T must be > 0.
    temperature: float = 1.0
    # Sample every turn under the JSON action grammar (grammar.py), as the serving side decodes:
    # True, False or "auto" (on when the chat template has no tool format of its own).
    constrained_decoding: typing.Union[bool, str] = False
    # Qwen3's enable_thinking (other families have no such switch): off, the instruct default.
    thinking: bool = False
    lr: float = 1e-5  # AdamW learning rate of the LoRA weights (the paper: 1e-5)
    weight_decay: float = 0.0
    warmup_steps: int = 0  # linear warm-up of the learning rate, in optimizer steps
    clip_low: float = 0.2  # the ratio is clipped to [1 − clip_low, 1 + clip_high] (DAPO's clip-higher)
    clip_high: float = 0.28
    adv_eps: float = 1e-6  # added to the group's std before dividing
    max_grad_norm: float = 1.0  # gradient clipping (global L2 norm)
    minibatches: int = 1  # optimizer steps per iteration, each on a share of the rollouts
    # Truncated importance sampling for rollouts from the policy server (as TRL's
    # vllm_importance_sampling_correction): each sampled token's loss is weighted by
    # min(π_trainer / π_server, tis_cap), correcting the sampler/trainer mismatch; 0 = off.
    tis_cap: float = 2.0
    micro_batch_size: int = 8  # rollouts per forward/backward (memory, not maths: gradients accumulate)
    max_new_tokens: int = 256  # per assistant turn
    max_turns: int = 8  # assistant turns per episode
    max_errors: int = 4  # tool errors before an episode ends
    max_seq_len: int = 4096  # a row out of room ends its episode alone
    # DAPO dynamic sampling: up to this many extra groups per iteration, from fresh seeds/tasks, replace
    # zero-variance groups until the update has `groups` informative ones (0 = off, as the official code).
    resample_groups: int = 0
    # Held-out seeds (disjoint from the training draws) scored before training and after every
    # `heldout_every` iterations and the last, `heldout_rollouts` samples each (0 = off).
    heldout_seeds: int = 0
    heldout_every: int = 1
    # Samples per held-out seed (None = rollouts_per_group).
    heldout_rollouts: typing.Optional[int] = None
    # Rollouts through this server instead of in-process generation (None = in-process).
    policy_server: typing.Optional[PolicyServerConfig] = None
    checkpoint_every: int = 5  # iterations between checkpoints (the last is always saved)
    seed: int = 0  # Python, NumPy and torch generators
    # What the env seeds (training and held-out) are drawn from; None = a secret drawn per run and kept in
    # its checkpoints: a generated env that knew it could pay wrong work only on the training seeds (rerun 17).
    seed_key: typing.Optional[int] = None
    device: str = "auto"  # "auto" = CUDA when present, else CPU
    dtype: str = "auto"  # of the frozen base: "auto" = bfloat16 on CUDA, float32 on CPU
    save_trajectories: bool = True  # each iteration's rollouts as JSONL (the gate's training data)
    s3: S3Config = field(default_factory=S3Config)


@dataclass
class GateAdapter:
    name: str  # the capability the adapter was trained for
    uri: str  # its PEFT directory


@dataclass
class GateConfig:
    model: str  # the base the adapters were trained on
    adapters: list  # GateAdapter objects, in expert order
    trajectories: list  # .jsonl URIs or GRPO trajectory directories (or {uri, tools})
    output_uri: str  # where gates.safetensors and the manifest go
    tokenizer: typing.Optional[str] = None  # default: the model's own
    lambda_lb: float = 0.05  # weight of the load-balance term λ_LB
    steps: int = 100  # optimizer steps
    lr: float = 1e-3  # AdamW learning rate of the gates
    batch_size: int = 4  # trajectories per step
    max_seq_len: int = 4096  # longer trajectories are left out
    seed: int = 0  # generators and the batch draws
    device: str = "auto"  # "auto" = CUDA when present, else CPU
    dtype: str = "auto"  # of the frozen base: "auto" = bfloat16 on CUDA, float32 on CPU
    only_successful: bool = True  # the paper fits the gate on successful trajectories only
    gradient_checkpointing: bool = True  # recompute activations in backward (memory)
    # The format the adapters were trained in (GrpoConfig.constrained_decoding), so the gate sees the same turns.
    constrained_decoding: typing.Union[bool, str] = False
    thinking: bool = False  # likewise GrpoConfig.thinking
    s3: S3Config = field(default_factory=S3Config)


def _coerce(tp, value, path: str):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        if len(args) == 1:  # Optional[X]: X's own error names the bad field
            return _coerce(args[0], value, path)
        for a in args:
            try:
                return _coerce(a, value, path)
            except ConfigError:
                continue
        raise ConfigError(f"{path}: unexpected value {value!r}")
    if tp is list or origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__}")
        return value
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise ConfigError(f"{path}: expected {getattr(tp, '__name__', tp)}, got {value!r}")


def from_dict(cls, raw, path: str = "config"):
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected an object")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}: unknown field")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            kwargs[f.name] = _coerce(hints[f.name], raw[f.name], f"{path}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{path}.{f.name}: required")
    obj = cls(**kwargs)
    _check_ranges(obj, path)
    return obj


def _check_ranges(obj, path: str) -> None:
    positive = ["iterations", "groups", "rollouts_per_group", "minibatches", "micro_batch_size", "max_new_tokens",
                "max_turns", "max_seq_len", "checkpoint_every", "heldout_every", "heldout_rollouts", "steps", "batch_size", "r", "alpha"]
    for name in positive:
        v = getattr(obj, name, None)
        if v is not None and v <= 0:
            raise ConfigError(f"{path}.{name}: must be > 0, got {v}")
    if isinstance(obj, GrpoConfig) and obj.rollouts_per_group < 2:
        raise ConfigError(f"{path}.rollouts_per_group: GRPO needs at least 2 rollouts per group, got {obj.rollouts_per_group}")
    if isinstance(obj, GrpoConfig) and obj.temperature <= 0:
        raise ConfigError(f"{path}.temperature: must be > 0 for GRPO (T = 0 makes every rollout of a group identical), got {obj.temperature}")
    if isinstance(obj, (GrpoConfig, GateConfig)) and isinstance(obj.constrained_decoding, str) and obj.constrained_decoding != "auto":
        raise ConfigError(f"{path}.constrained_decoding: expected true, false or \"auto\", got {obj.constrained_decoding!r}")
    if isinstance(obj, GrpoConfig) and obj.heldout_seeds < 0:
        raise ConfigError(f"{path}.heldout_seeds: must be >= 0, got {obj.heldout_seeds}")
    if isinstance(obj, GrpoConfig) and obj.resample_groups < 0:
        raise ConfigError(f"{path}.resample_groups: must be >= 0, got {obj.resample_groups}")
    if isinstance(obj, GrpoConfig) and obj.tis_cap < 0:
        raise ConfigError(f"{path}.tis_cap: must be >= 0 (0 = off), got {obj.tis_cap}")
    if isinstance(obj, PolicyServerConfig):
        if not obj.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{path}.base_url: expected an http(s) URL, got {obj.base_url!r}")
        if not obj.lora_dir:
            raise ConfigError(f"{path}.lora_dir: required")
        if obj.timeout_s <= 0:
            raise ConfigError(f"{path}.timeout_s: must be > 0, got {obj.timeout_s}")
        if obj.logprobs not in ("raw", "processed"):
            raise ConfigError(f"{path}.logprobs: expected \"raw\" or \"processed\", got {obj.logprobs!r}")
    if isinstance(obj, GateConfig):
        if not obj.adapters:
            raise ConfigError(f"{path}.adapters: at least one adapter is required")
        obj.adapters = [from_dict(GateAdapter, a, f"{path}.adapters[{i}]") for i, a in enumerate(obj.adapters)]


def load_config(cls, path: str):
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--config: no such file {path}")
    try:
        raw = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from e
    return from_dict(cls, raw, p.name)
