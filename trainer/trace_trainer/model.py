"""Loading the frozen base model (HF id, local directory or GGUF file) and wrapping it in a LoRA."""
from __future__ import annotations

import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from .attention import use_grouped_attention
from .config import LoraConfig
from .events import TrainerError


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        # CPU kernels are fastest and exact in float32; on CUDA the frozen base runs in bfloat16.
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, dtype)


def _source(name: str) -> tuple[str, dict]:
    """GGUF files load through transformers' GGUF loader, which dequantizes (e.g. Q4_1) to `dtype`."""
    if name.endswith(".gguf"):
        if not os.path.isfile(name):
            raise TrainerError("ModelNotFound", f"model: no such GGUF file {name}", retryable=False)
        return os.path.dirname(os.path.abspath(name)), {"gguf_file": os.path.basename(name)}
    return name, {}


def load_tokenizer(name: str):
    src, kw = _source(name)
    tok = AutoTokenizer.from_pretrained(src, **kw)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_base(name: str, device: torch.device, dtype: torch.dtype):
    src, kw = _source(name)
    try:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype, **kw)
    except OSError as e:
        raise TrainerError("ModelNotFound", f"model: cannot load {name}: {e}", retryable=False) from e
    model.to(device)
    use_grouped_attention(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def add_lora(model, cfg: LoraConfig):
    from peft import LoraConfig as PeftLoraConfig, get_peft_model

    peft_cfg = PeftLoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=cfg.target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_cfg)


def trainable_parameters(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]
