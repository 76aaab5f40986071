"""GRPO checkpoints: the adapter in PEFT layout (adapter_config.json + adapter_model.safetensors,
loadable unchanged by PeftModel.from_pretrained and vLLM) plus optimizer, scheduler, every RNG
state, the iteration and the metrics — enough to continue bit-for-bit."""
from __future__ import annotations

import hashlib
import io
import random
import tempfile
from pathlib import Path

import numpy as np
import torch

from .storage import Store, join

LATEST = "checkpoints/latest.json"


def rng_state(draw: random.Random) -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "draw": draw.getstate(),
    }


def set_rng_state(s: dict, draw: random.Random) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if s["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    draw.setstate(s["draw"])


def save(store: Store, prefix: str, iteration: int, model, optimizer, scheduler, rng: dict, metrics: list) -> str:
    uri = join(prefix, f"checkpoints/iter-{iteration:06d}")
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(str(Path(tmp) / "adapter"))
        state = {"iteration": iteration, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                 "rng": rng, "metrics": metrics}
        buf = io.BytesIO()
        torch.save(state, buf)
        (Path(tmp) / "trainer_state.pt").write_bytes(buf.getvalue())
        store.put_dir(tmp, uri)
    store.put_json(join(prefix, LATEST), {"uri": uri, "iteration": iteration})
    return uri


def resolve(store: Store, uri: str) -> str:
    """A checkpoint URI, or an artifact prefix whose latest checkpoint is wanted."""
    pointer = join(uri, LATEST)
    if store.exists(pointer):
        return store.get_json(pointer)["uri"]
    return uri


def load(store: Store, uri: str, workdir: str) -> tuple[str, dict]:
    """(local adapter dir, trainer state) of a checkpoint."""
    local = store.get_dir(uri, workdir)
    state = torch.load(Path(local) / "trainer_state.pt", weights_only=False, map_location="cpu")
    return str(Path(local) / "adapter"), state


def file_ref(store: Store, uri: str) -> dict:
    data = store.get_bytes(uri)
    return {"uri": uri, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
