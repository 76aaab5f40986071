"""The token-level mixture of experts over frozen LoRA adapters (stage 4), shared by fitting
(gate.py) and serving (serve.py). At every adapted linear layer: p = softmax(g(h)) with a
zero-initialised g = Linear(d → C), and output = W h + Σ_c p_c · s_c B_c A_c h (s_c = α_c / r_c);
training routes softly, inference top-1. Also the gate's files: gates.safetensors and a manifest
naming each adapter by content hash."""
from __future__ import annotations

import hashlib
import json
import math
import tempfile
from pathlib import Path

import torch
from torch import nn

from .events import TrainerError
from .storage import Store, join

_PREFIX = "base_model.model."


class _AddAuxLoss(torch.autograd.Function):
    """Identity on `out`; in backward `aux` gets gradient 1, as if it were added to the loss. A
    per-layer loss applied this way also trains inside a recomputed (checkpointed) region, where
    a loss assembled after the forward pass would see no graph."""

    @staticmethod
    def forward(ctx, out, aux):
        return out.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.new_ones(())


def balance_term(probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """C · Σ_c f_c P_c of one layer over the masked tokens; f_c (argmax share) carries no gradient."""
    m = mask.to(probs.dtype).unsqueeze(-1)
    n = m.sum()
    C = probs.shape[-1]
    P = (probs * m).sum(dim=(0, 1)) / n
    f = (nn.functional.one_hot(probs.argmax(-1), C).to(probs.dtype) * m).sum(dim=(0, 1)) / n
    return C * (f.detach() * P).sum()


class MoELoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, A: torch.Tensor, B: torch.Tensor):
        """A: [C, r, d_in], B: [C, d_out, r] with each adapter's scaling folded into B; rows of a
        lower-rank (or absent) adapter are zero."""
        super().__init__()
        self.base = base
        self.register_buffer("A", A)
        self.register_buffer("B", B)
        self.gate = nn.Linear(A.shape[2], A.shape[0], dtype=torch.float32, device=A.device)
        nn.init.zeros_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)
        self.top1 = False
        self.last_probs: torch.Tensor | None = None
        # Set by gate_losses: (token mask, weight) of this layer's load-balance term.
        self.balance: tuple[torch.Tensor, float] | None = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.base(h)
        x = h.float()
        probs = torch.softmax(self.gate(x), dim=-1)
        self.last_probs = probs
        w = nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).float() if self.top1 else probs
        ha = torch.einsum("...d,crd->...cr", x, self.A) * w.unsqueeze(-1)
        out = out + torch.einsum("...cr,cor->...o", ha, self.B).to(out.dtype)
        if self.balance is not None and probs.requires_grad:
            mask, weight = self.balance
            out = _AddAuxLoss.apply(out, weight * balance_term(probs, mask))
        return out


def read_adapter(adapter_dir: str) -> tuple[dict, dict]:
    """(module name → (A, B·scaling), adapter config) of a PEFT LoRA directory."""
    from safetensors.torch import load_file

    cfg = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    scaling = cfg["lora_alpha"] / (math.sqrt(cfg["r"]) if cfg.get("use_rslora") else cfg["r"])
    weights = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
    mods: dict = {}
    for k, v in weights.items():
        for part in ("lora_A", "lora_B"):
            tag = f".{part}.weight"
            if k.endswith(tag):
                name = k[: -len(tag)]
                name = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
                mods.setdefault(name, {})[part] = v.float()
    return {n: (m["lora_A"], m["lora_B"] * scaling) for n, m in mods.items() if "lora_A" in m and "lora_B" in m}, cfg


def attach_moe(model, adapters: list[dict]) -> dict[str, MoELoraLinear]:
    """Replaces every linear that any adapter adapts with a MoELoraLinear; returns them by name."""
    names = sorted({n for a in adapters for n in a})
    device = next(model.parameters()).device
    layers = {}
    for name in names:
        base = model.get_submodule(name)
        if not isinstance(base, nn.Linear):
            raise TrainerError("AdapterMismatch", f"adapter targets {name}, which is not a linear layer of the base model", retryable=False)
        r = max(a[name][0].shape[0] for a in adapters if name in a)
        A = torch.zeros(len(adapters), r, base.in_features)
        B = torch.zeros(len(adapters), base.out_features, r)
        for c, a in enumerate(adapters):
            if name in a:
                rc = a[name][0].shape[0]
                A[c, :rc], B[c, :, :rc] = a[name][0], a[name][1]
        layer = MoELoraLinear(base, A.to(device), B.to(device))
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, layer)
        layers[name] = layer
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in layers.values():
        for p in layer.gate.parameters():
            p.requires_grad_(True)
    return layers


def load_balance_loss(layers: dict, token_mask: torch.Tensor, lambda_lb: float) -> torch.Tensor:
    """λ · C · Σ_c f_c P_c averaged over layers; f_c: share of tokens whose argmax is c, P_c: mean probability."""
    return lambda_lb * sum(balance_term(layer.last_probs, token_mask) for layer in layers.values()) / len(layers)


def set_top1(layers: dict, on: bool) -> None:
    for layer in layers.values():
        layer.top1 = on


def gate_state(layers: dict) -> dict:
    return {f"{n}.{k}": v.detach().cpu().contiguous() for n, layer in layers.items() for k, v in layer.gate.state_dict().items()}


def load_gate_state(layers: dict, state: dict) -> None:
    for n, layer in layers.items():
        layer.gate.load_state_dict({"weight": state[f"{n}.weight"], "bias": state[f"{n}.bias"]})


def sha256_file(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_gate(store: Store, output_uri: str, layers: dict, manifest: dict) -> dict:
    from safetensors.torch import save_file

    uri = join(output_uri, "gate")
    with tempfile.TemporaryDirectory() as tmp:
        save_file(gate_state(layers), str(Path(tmp) / "gates.safetensors"))
        manifest = {**manifest, "gates_sha256": sha256_file(str(Path(tmp) / "gates.safetensors"))}
        (Path(tmp) / "gate_manifest.json").write_text(json.dumps(manifest, indent=2))
        store.put_dir(tmp, uri)
    from .checkpoint import file_ref

    return {"gate_uri": uri, "manifest": file_ref(store, join(uri, "gate_manifest.json")),
            "gates": file_ref(store, join(uri, "gates.safetensors")), "history": manifest["history"][-1:]}


def load_gate(model, store: Store, gate_uri: str) -> dict:
    """Attaches a saved gate (and its adapters, verified by hash) to a base model, routing top-1."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as work:
        local = store.get_dir(gate_uri, str(Path(work) / "gate"))
        manifest = json.loads((Path(local) / "gate_manifest.json").read_text())
        state = load_file(str(Path(local) / "gates.safetensors"))
        adapters = []
        for i, a in enumerate(manifest["adapters"]):
            d = store.get_dir(a["uri"], str(Path(work) / f"adapter-{i}"))
            if sha256_file(str(Path(d) / "adapter_model.safetensors")) != a["sha256"]:
                raise TrainerError("AdapterChanged", f"gate manifest: adapter {a['name']} at {a['uri']} no longer has sha256 {a['sha256']}", retryable=False)
            adapters.append(read_adapter(d)[0])
        layers = attach_moe(model, adapters)
    load_gate_state(layers, {k: v.to(next(model.parameters()).device) for k, v in state.items()})
    set_top1(layers, True)
    for p in model.parameters():
        p.requires_grad_(False)
    return layers
