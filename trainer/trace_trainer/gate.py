"""Stage 4: a token-level mixture of experts over frozen LoRA adapters. At every adapted linear
layer: p = softmax(g(h)) with a zero-initialised g = Linear(d → C), and
output = W h + Σ_c p_c · s_c B_c A_c h (s_c = α_c / r_c). Only the gates train, on the assistant
tokens of successful trajectories, with CE + λ_LB · C · Σ_c f_c P_c; inference routes top-1."""
from __future__ import annotations

import hashlib
import json
import math
import random
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .chat import ChatFormat, uses_actions
from .config import GateConfig
from .events import TrainerError, emit
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


def fetch_adapters(store: Store, specs: list, workdir: str) -> list[dict]:
    """Local copies of the adapters with their content hashes; the manifest names adapters by hash."""
    out = []
    for i, spec in enumerate(specs):
        local = store.get_dir(spec.uri, str(Path(workdir) / f"adapter-{i}"))
        out.append({"name": spec.name, "uri": spec.uri, "dir": local, "sha256": sha256_file(str(Path(local) / "adapter_model.safetensors"))})
    return out


def load_trajectories(store: Store, entries: list, only_successful: bool) -> list[tuple[dict, list]]:
    """(env description {systemPrompt, tools}, trajectories) per entry: a .jsonl URI or a directory
    written by the GRPO trainer (env.json + iter-*.jsonl)."""
    out = []
    for e in entries:
        uri, tools = (e, None) if isinstance(e, str) else (e["uri"], e.get("tools"))
        files = [uri] if uri.endswith(".jsonl") else [u for u in store.list(uri) if u.endswith(".jsonl")]
        env_json = join(uri.rsplit("/", 1)[0] if uri.endswith(".jsonl") else uri, "env.json")
        env = store.get_json(env_json) if store.exists(env_json) else {"systemPrompt": "", "tools": []}
        if tools is not None:
            env["tools"] = tools
        trajs = [json.loads(line) for f in files for line in store.get_bytes(f).decode().splitlines() if line.strip()]
        out.append((env, [t for t in trajs if t["success"] or not only_successful]))
    return out


def encode_examples(fmt: ChatFormat, data, max_seq_len: int) -> list[tuple[list, list, str]]:
    """(token ids, assistant mask, source) per usable trajectory; source is "gold" for gold
    demonstrations, "policy" for the policy's own trajectories."""
    examples = []
    for env, trajs in data:
        for t in trajs:
            msgs = t["messages"]
            system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else env["systemPrompt"]
            body = msgs[1:] if msgs and msgs[0]["role"] == "system" else msgs
            ids, mask = fmt.conversation_ids(system, env["tools"], body)
            if sum(mask) and len(ids) <= max_seq_len:
                examples.append((ids, mask, t.get("source", "policy")))
    return examples


def gate_losses(model, layers, batch, pad: int, lambda_lb: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(CE on the assistant tokens, load-balance loss). The load-balance gradient is applied inside
    each MoE layer (_AddAuxLoss), so backpropagating the CE trains both; the returned balance loss
    is its value, detached."""
    device = next(model.parameters()).device
    width = max(len(ex[0]) for ex in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    amask = torch.zeros((len(batch), width), dtype=torch.float32)
    for i, (x, m, *_) in enumerate(batch):
        ids[i, : len(x)] = torch.tensor(x)
        attn[i, : len(x)] = 1
        amask[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
    ids, attn, amask = ids.to(device), attn.to(device), amask.to(device)
    for layer in layers.values():
        layer.balance = (attn, lambda_lb / len(layers)) if lambda_lb > 0 else None
    # The output head runs only where the loss is taken (assistant tokens): full [B, T, vocab]
    # logits of long tool-use transcripts would need gigabytes for nothing.
    hidden = model.base_model(input_ids=ids, attention_mask=attn).last_hidden_state[:, :-1]
    where = amask[:, 1:] > 0
    logits = model.get_output_embeddings()(hidden[where]).float()
    ce = nn.functional.cross_entropy(logits, ids[:, 1:][where])
    with torch.no_grad():
        lb = load_balance_loss(layers, attn, lambda_lb)
    return ce, lb


# Examples the reported routing share is measured on (a fixed random sample when there are more).
ROUTING_EXAMPLES = 32


def fit_gate(cfg: GateConfig, *, model=None, tokenizer=None, store: Store | None = None) -> dict:
    from .model import load_base, load_tokenizer, pick_device, pick_dtype

    store = store or Store(cfg.s3)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    emit("started", steps=cfg.steps, device=str(device))
    tok = tokenizer or load_tokenizer(cfg.tokenizer or cfg.model)
    model = model if model is not None else load_base(cfg.model, device, pick_dtype(cfg.dtype, device))
    fmt = ChatFormat(tok, actions=uses_actions(cfg.constrained_decoding, tok))
    with tempfile.TemporaryDirectory() as work:
        adapters = fetch_adapters(store, cfg.adapters, work)
        parsed = [read_adapter(a["dir"]) for a in adapters]
        layers = attach_moe(model, [p[0] for p in parsed])
    examples = encode_examples(fmt, load_trajectories(store, cfg.trajectories, cfg.only_successful), cfg.max_seq_len)
    if not examples:
        raise TrainerError("NoTrainingData", "gate: no successful trajectories with assistant tokens in config.trajectories", retryable=False)
    if cfg.gradient_checkpointing and hasattr(model, "gradient_checkpointing_enable"):
        # Only the gates train, but backward still needs every layer's activations (attention
        # included) over the whole transcript; recomputing them per layer bounds the memory.
        # Reentrant: measured on SmolLM2 with LoRA-MoE layers, the non-reentrant variant kept
        # nearly every layer's activations anyway (8.7 GB vs 4.9 GB at 2.2k tokens).
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.enable_input_require_grads()
    params = [p for layer in layers.values() for p in layer.gate.parameters()]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    draw = random.Random(cfg.seed)
    model.train()
    history = []
    for step in range(1, cfg.steps + 1):
        batch = [examples[draw.randrange(len(examples))] for _ in range(min(cfg.batch_size, len(examples)))]
        ce, lb = gate_losses(model, layers, batch, tok.pad_token_id, cfg.lambda_lb)
        opt.zero_grad(set_to_none=True)
        ce.backward()  # the balance term's gradient joins inside each layer (_AddAuxLoss)
        opt.step()
        history.append({"step": step, "ce": ce.item(), "lb": lb.item()})
        if step % max(1, cfg.steps // 20) == 0 or step == cfg.steps:
            emit("progress", step=step, steps=cfg.steps, ce=ce.item(), lb=lb.item(), routing=routing_share(layers, tok.pad_token_id))
    model.eval()
    # Routing is measured on a fixed sample: a forward over every example costs far more than the
    # fit itself on CPU (169 transcripts vs 8 steps of 2 in the showcase).
    measured = random.Random(cfg.seed + 1).sample(examples, min(len(examples), ROUTING_EXAMPLES))
    routing = dict(zip([a["name"] for a in adapters], routing_on(model, layers, measured, tok.pad_token_id, cfg.batch_size)))
    by_source = {src: sum(1 for e in examples if e[2] == src) for src in ("policy", "gold")}
    manifest = {
        "kind": "trace-lora-moe-gate",
        "base_model": cfg.model,
        "adapters": [{"name": a["name"], "uri": a["uri"], "sha256": a["sha256"], "r": p[1]["r"], "lora_alpha": p[1]["lora_alpha"]}
                     for a, p in zip(adapters, parsed)],
        "modules": sorted(layers),
        "lambda_lb": cfg.lambda_lb,
        "steps": cfg.steps,
        "examples": len(examples),
        "examples_by_source": by_source,
        "routing": "top1",
        "routing_share": routing,
        "routing_examples": len(measured),
        "history": history,
    }
    return {**save_gate(store, cfg.output_uri, layers, manifest), "routing": routing, "examples": by_source}


def routing_share(layers: dict, _pad: int) -> list[float]:
    """Share of the last batch's tokens routed (top-1) to each adapter, averaged over layers."""
    shares = None
    for layer in layers.values():
        p = layer.last_probs.detach()
        s = nn.functional.one_hot(p.argmax(-1), p.shape[-1]).float().mean(dim=(0, 1))
        shares = s if shares is None else shares + s
    return [round(float(x), 4) for x in shares / len(layers)]


@torch.no_grad()
def routing_on(model, layers: dict, examples: list, pad: int, batch_size: int) -> list[float]:
    """Share of assistant tokens each adapter receives under top-1 routing (as served), averaged
    over the adapted layers, on every training example."""
    counts = None
    set_top1(layers, True)
    try:
        for s in range(0, len(examples), batch_size):
            batch = examples[s: s + batch_size]
            gate_losses(model, layers, batch, pad, 0.0)
            width = max(len(ex[0]) for ex in batch)
            mask = torch.zeros((len(batch), width))
            for i, ex in enumerate(batch):
                mask[i, : len(ex[1])] = torch.tensor(ex[1], dtype=torch.float32)
            for layer in layers.values():
                p = layer.last_probs
                hits = nn.functional.one_hot(p.argmax(-1), p.shape[-1]).float() * mask.to(p.device).unsqueeze(-1)
                c = hits.sum(dim=(0, 1)).cpu()
                counts = c if counts is None else counts + c
    finally:
        set_top1(layers, False)
    total = float(counts.sum())
    return [round(float(x) / total, 4) for x in counts] if total else [0.0] * len(counts)


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
