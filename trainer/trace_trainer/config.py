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
    r: int = 16
    alpha: int = 16
    dropout: float = 0.0
    # PEFT's "all-linear": every attention and MLP projection, never the output head.
    target_modules: typing.Union[str, list] = "all-linear"


@dataclass
class S3Config:
    endpoint: typing.Optional[str] = None
    region: str = "us-east-1"
    force_path_style: bool = False


@dataclass
class GrpoConfig:
    model: str
    env_url: str
    output_uri: str
    tokenizer: typing.Optional[str] = None
    lora: LoraConfig = field(default_factory=LoraConfig)
    # A PEFT adapter directory (local path or s3://) the LoRA weights start from: scheduled
    # retraining continues the previous run's adapter (fresh optimizer, iteration 0). --resume wins.
    init_adapter_uri: typing.Optional[str] = None
    iterations: int = 40
    groups: int = 4
    rollouts_per_group: int = 16
    temperature: float = 1.0
    lr: float = 1e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    clip_low: float = 0.2
    clip_high: float = 0.28
    adv_eps: float = 1e-6
    max_grad_norm: float = 1.0
    minibatches: int = 1
    micro_batch_size: int = 8
    max_new_tokens: int = 256
    max_turns: int = 8
    max_errors: int = 4
    max_seq_len: int = 4096
    checkpoint_every: int = 5
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    save_trajectories: bool = True
    s3: S3Config = field(default_factory=S3Config)


@dataclass
class GateAdapter:
    name: str
    uri: str


@dataclass
class GateConfig:
    model: str
    adapters: list
    trajectories: list
    output_uri: str
    tokenizer: typing.Optional[str] = None
    lambda_lb: float = 0.05
    steps: int = 100
    lr: float = 1e-3
    batch_size: int = 4
    max_seq_len: int = 4096
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    only_successful: bool = True
    s3: S3Config = field(default_factory=S3Config)


def _coerce(tp, value, path: str):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
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
                "max_turns", "max_seq_len", "checkpoint_every", "steps", "batch_size", "r", "alpha"]
    for name in positive:
        v = getattr(obj, name, None)
        if v is not None and v <= 0:
            raise ConfigError(f"{path}.{name}: must be > 0, got {v}")
    if isinstance(obj, GrpoConfig) and obj.rollouts_per_group < 2:
        raise ConfigError(f"{path}.rollouts_per_group: GRPO needs at least 2 rollouts per group, got {obj.rollouts_per_group}")
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
