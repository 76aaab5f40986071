"""Stage 4, fitting the gate of the LoRA-MoE (moe.py): only the gates train, on the assistant
tokens of successful trajectories, with CE + λ_LB · C · Σ_c f_c P_c (the balance term applied
inside each layer); then the routing share each adapter receives under top-1 routing."""
from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import torch
from torch import nn

from .batching import pad, seed_all
from .chat import ChatFormat, env_text, uses_actions
from .config import GateConfig
from .events import TrainerError, emit
from .moe import attach_moe, load_balance_loss, read_adapter, save_gate, set_top1, sha256_file
from .storage import Store, join


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
            with env_text(f"a trajectory of seed {t.get('seed')}"):
                ids, mask = fmt.conversation_ids(system, env["tools"], body)
            if sum(mask) and len(ids) <= max_seq_len:
                examples.append((ids, mask, t.get("source", "policy")))
    return examples


def gate_losses(model, layers, batch, pad_id: int, lambda_lb: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(CE on the assistant tokens, load-balance loss). The load-balance gradient is applied inside
    each MoE layer (_AddAuxLoss), so backpropagating the CE trains both; the returned balance loss
    is its value, detached."""
    device = next(model.parameters()).device
    ids, attn = pad([ex[0] for ex in batch], pad_id, device=device)
    amask, _ = pad([ex[1] for ex in batch], 0, dtype=torch.float32, device=device)
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
    seed_all(cfg.seed)
    device = pick_device(cfg.device)
    emit("started", steps=cfg.steps, device=str(device))
    tok = tokenizer or load_tokenizer(cfg.tokenizer or cfg.model)
    fmt = ChatFormat(tok, actions=uses_actions(cfg.constrained_decoding, tok), thinking=cfg.thinking)  # before the weights load
    model = model if model is not None else load_base(cfg.model, device, pick_dtype(cfg.dtype, device))
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
            emit("progress", step=step, steps=cfg.steps, ce=ce.item(), lb=lb.item(), routing=routing_share(layers))
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


def routing_share(layers: dict) -> list[float]:
    """Share of the last batch's tokens routed (top-1) to each adapter, averaged over layers."""
    shares = None
    for layer in layers.values():
        p = layer.last_probs.detach()
        s = nn.functional.one_hot(p.argmax(-1), p.shape[-1]).float().mean(dim=(0, 1))
        shares = s if shares is None else shares + s
    return [round(float(x), 4) for x in shares / len(layers)]


@torch.no_grad()
def routing_on(model, layers: dict, examples: list, pad_id: int, batch_size: int) -> list[float]:
    """Share of assistant tokens each adapter receives under top-1 routing (as served), averaged
    over the adapted layers, on the given examples."""
    counts = None
    set_top1(layers, True)
    try:
        for s in range(0, len(examples), batch_size):
            batch = examples[s: s + batch_size]
            gate_losses(model, layers, batch, pad_id, 0.0)
            mask, _ = pad([ex[1] for ex in batch], 0, dtype=torch.float32)
            for layer in layers.values():
                p = layer.last_probs
                hits = nn.functional.one_hot(p.argmax(-1), p.shape[-1]).float() * mask.to(p.device).unsqueeze(-1)
                c = hits.sum(dim=(0, 1)).cpu()
                counts = c if counts is None else counts + c
    finally:
        set_top1(layers, False)
    total = float(counts.sum())
    return [round(float(x) / total, 4) for x in counts] if total else [0.0] * len(counts)
