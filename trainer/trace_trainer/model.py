"""Loading the frozen base model (HF id, local directory or GGUF file) and wrapping it in a LoRA."""
from __future__ import annotations

import json
import os
import shutil
import tempfile

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


def dequantized(gguf: str) -> str | None:
    """The GGUF's weights and tokenizer dequantized to float32 in Hugging Face layout, in a sibling
    directory `<file>.hf` written on first use. Parsing the GGUF costs ~40 s on 2 CPU cores every
    time a trainer or server starts; the safetensors copy loads in seconds and holds the same
    float32 values. None where the directory cannot be written (the GGUF is then read directly)."""
    stat = os.stat(gguf)
    source = {"gguf": os.path.basename(gguf), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    out = gguf + ".hf"
    marker = os.path.join(out, "source.json")
    if os.path.isfile(marker):
        with open(marker) as f:
            if json.load(f) == source:
                return out
    src, kw = os.path.dirname(os.path.abspath(gguf)), {"gguf_file": os.path.basename(gguf)}
    try:
        tmp = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(gguf)), prefix=".dequantize-")
    except OSError:
        return None
    try:
        AutoTokenizer.from_pretrained(src, **kw).save_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, **kw)
        # Dequantized at load, the weights are plain float32; only the GGUF marker blocks saving.
        model.hf_quantizer = None
        model.config.__dict__.pop("quantization_config", None)
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "source.json"), "w") as f:
            json.dump(source, f)
        if os.path.isdir(out):  # a copy of an older file with the same name
            shutil.rmtree(out, ignore_errors=True)
        try:
            os.rename(tmp, out)
        except OSError:  # another process finished its copy first; both hold the same values
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _source(name: str) -> tuple[str, dict]:
    """GGUF files are dequantized (e.g. Q4_1) by transformers' GGUF loader, once (`dequantized`)."""
    if name.endswith(".gguf"):
        if not os.path.isfile(name):
            raise TrainerError("ModelNotFound", f"model: no such GGUF file {name}", retryable=False)
        cached = dequantized(name)
        if cached:
            return cached, {}
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
