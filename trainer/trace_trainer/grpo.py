"""Multi-turn GRPO for one LoRA adapter: group advantages, the clipped surrogate on exactly the
sampled assistant tokens (token-level normalisation, no KL), optional DAPO dynamic sampling of
informative groups, AdamW, checkpoints and resume; rollouts in-process or on a policy server."""
from __future__ import annotations

import hashlib
import json
import math
import random
import secrets
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from . import batching, checkpoint
from .chat import ChatFormat, uses_actions
from .config import GrpoConfig
from .envclient import EnvClient
from .events import ConfigError, Interrupted, emit
from .grammar import ActionGrammar, action_schema
from .model import add_lora, load_base, load_tokenizer, pick_device, pick_dtype, trainable_parameters
from .policy_server import PolicyServer
from .rollout import Generate, Rollout, collect
from .sampler import in_process, shared_prefix
from .storage import Store, join


def group_advantages(rewards: list[float], eps: float) -> list[float] | None:
    """(r − mean)/(std + ε) with the population std; None for a zero-variance (uninformative) group.
    Rewards must be finite; the ratio is taken on rewards scaled to at most 1 in size (it does not
    depend on scale, and an env's 1e308 no longer overflows the mean into NaN advantages)."""
    r = np.asarray(rewards, dtype=np.float64)
    if not np.isfinite(r).all():
        raise ValueError(f"rewards must be finite numbers, got {rewards}")
    if r.max() - r.min() < 1e-12:
        return None
    scale = max(1.0, float(np.abs(r).max()))
    r = r / scale
    return list((r - r.mean()) / (r.std() + eps / scale))


def _module_names(v) -> list[str]:
    """PEFT target_modules as saved (list) or resolved (set), or a single name/pattern."""
    return sorted(v) if isinstance(v, (list, set, tuple)) else [str(v)]


def _causal_lm(model):
    """The HF causal LM under a PEFT wrapper (its layers carry the adapters in place)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _mask_tensor(masks: list[list[int]], width: int, device) -> torch.Tensor:
    """bool [B, width]: position t of the shifted sequence predicts token t+1, scored when its mask is 1."""
    m = torch.zeros((len(masks), width), dtype=torch.bool)
    for i, mask in enumerate(masks):
        m[i, : len(mask) - 1] = torch.tensor(mask[1:], dtype=torch.bool)
    return m.to(device)


# Below this many shared tokens a separate prefix forward costs more than it saves.
MIN_SHARED_PREFIX = 16


def _hidden_states(decoder, seqs: list[list[int]], ids: torch.Tensor, attn: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """Final hidden states [B, L-1, H] (position t predicts token t+1). The prefix every sequence
    shares (a group's prompt, the system prompt and tools) runs once and its keys/values are
    copied to every row, so K rollouts of a group cost one prompt plus K continuations; gradients
    flow through the shared prefix from every row, so this is the same computation, not an
    approximation. Only the unshared part is recomputed per row."""
    shared = shared_prefix(seqs)
    # The last shared token stays with the rows: its state predicts the first token after it.
    p = min(shared - 1, int(scored.any(0).nonzero()[0]) if scored.any() else shared - 1)
    if len(seqs) == 1 or p < MIN_SHARED_PREFIX:
        return decoder(input_ids=ids, attention_mask=attn).last_hidden_state[:, :-1]
    head = decoder(input_ids=ids[:1, :p], use_cache=True)
    cache = head.past_key_values
    cache.reorder_cache(torch.zeros(len(seqs), dtype=torch.long, device=ids.device))  # differentiable copy to every row
    pos = torch.arange(p, ids.shape[1], device=ids.device).unsqueeze(0).expand(len(seqs), -1)
    tail = decoder(input_ids=ids[:, p:], attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True)
    return torch.cat([head.last_hidden_state.expand(len(seqs), -1, -1), tail.last_hidden_state], dim=1)[:, :-1]


def token_logprobs(model, seqs: list[list[int]], masks: list[list[int]], pad: int, temperature: float,
                   allowed: list[torch.Tensor] | None = None, grammar: ActionGrammar | None = None) -> torch.Tensor:
    """log π(token_t | tokens_<t) at the mask-1 tokens of each right-padded sequence, under the
    distribution the sampler drew from: softmax(logits / T) over the tokens `grammar` allowed
    (`allowed[i]`: bool [masked tokens of seq i, V]), with its bias. Shape [B, L-1], 0 where not scored.
    The output head runs only at scored positions: a [B, L, V] float32 logits tensor is tens of GB
    at Qwen-size vocabularies."""
    device = next(model.parameters()).device
    ids, attn = batching.pad(seqs, pad, device=device)
    scored = _mask_tensor(masks, ids.shape[1] - 1, device)
    where = scored.nonzero(as_tuple=True)
    causal = _causal_lm(model)
    hidden = _hidden_states(causal.base_model, seqs, ids, attn, scored)
    logits = causal.get_output_embeddings()(hidden[where]).float()
    if allowed is not None:
        if grammar is None:
            raise ValueError("token_logprobs: `allowed` masks need the grammar they came from")
        logits = grammar.constrain(logits, torch.cat([a.to(device) for a in allowed]))
    logits = logits / temperature
    target = ids[:, 1:][where]
    picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return torch.zeros(scored.shape, dtype=picked.dtype, device=device).index_put(where, picked)


def surrogate_sum(logp, old_logp, adv, mask, clip_low: float, clip_high: float, weights=None) -> torch.Tensor:
    """Σ over masked tokens of −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A), each token times its
    importance weight (`weights`, default 1); the caller divides by the token count."""
    ratio = torch.exp(logp - old_logp)
    a = adv.unsqueeze(-1)
    per_token = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * a)
    return (per_token * mask * (1.0 if weights is None else weights)).sum()


def tis_weights(old_logp, sampler_logps: list, mask, cap: float, stats: dict):
    """min(π_old / π_sampler, cap) per sampled token (truncated importance sampling), 1 for rows
    without the sampler's log-probs; adds Σ|log π_sampler − log π_old| and the token count to
    `stats` (the mismatch metric)."""
    weights = torch.ones_like(old_logp)
    for i, lps in enumerate(sampler_logps):
        where = mask[i].nonzero(as_tuple=True)[0]
        if lps is None or lps.shape[0] != where.shape[0]:
            continue
        diff = old_logp[i, where].detach() - lps.to(old_logp.device, old_logp.dtype)
        weights[i, where] = torch.exp(diff).clamp(max=cap)
        stats["gap_sum"] = stats.get("gap_sum", 0.0) + float(diff.abs().sum())
        stats["gap_n"] = stats.get("gap_n", 0) + int(where.shape[0])
    return weights


def accumulate_gradients(model, rollouts: list[Rollout], advantages: list[float], *, pad: int, micro_batch_size: int,
                         clip_low: float, clip_high: float, temperature: float = 1.0, old_logps: list[torch.Tensor] | None = None,
                         allowed: list[torch.Tensor] | None = None, grammar: ActionGrammar | None = None,
                         sampler_logps: list | None = None, tis_cap: float = 0.0, stats: dict | None = None) -> float:
    """Backpropagates the minibatch loss in micro-batches. Each micro-batch's surrogate is divided by
    the minibatch's total number of sampled tokens, so any split gives the same gradient. With
    `sampler_logps` (per rollout, the sampler's log-prob of each sampled token, or None) and
    `tis_cap` > 0, tokens are weighted by truncated importance sampling (`tis_weights`)."""
    device = next(model.parameters()).device
    total_tokens = sum(sum(r.mask) for r in rollouts)
    loss_total = 0.0
    for start in range(0, len(rollouts), micro_batch_size):
        mb = rollouts[start: start + micro_batch_size]
        logp = token_logprobs(model, [r.ids for r in mb], [r.mask for r in mb], pad, temperature,
                              None if allowed is None else allowed[start: start + len(mb)], grammar)
        mask = _mask_tensor([r.mask for r in mb], logp.shape[1], device).float()
        if old_logps is None:
            old = logp.detach()
        else:
            old = torch.zeros_like(logp)
            for i, o in enumerate(old_logps[start: start + len(mb)]):
                old[i, : o.shape[0]] = o.to(device)
        adv = torch.tensor(advantages[start: start + len(mb)], dtype=torch.float32, device=device)
        weights = None
        if sampler_logps is not None and tis_cap > 0:
            weights = tis_weights(old, sampler_logps[start: start + len(mb)], mask, tis_cap, {} if stats is None else stats)
        loss = surrogate_sum(logp, old, adv, mask, clip_low, clip_high, weights) / total_tokens
        loss.backward()
        loss_total += float(loss.detach())
    return loss_total


class GrpoTrainer:
    def __init__(self, cfg: GrpoConfig, *, model=None, tokenizer=None, store: Store | None = None):
        self.cfg = cfg
        self.device = pick_device(cfg.device)
        batching.seed_all(cfg.seed)
        self.tok = tokenizer or load_tokenizer(cfg.tokenizer or cfg.model)
        # Before the weights load: a chat template the rollouts cannot use fails in seconds, not minutes.
        self.fmt = ChatFormat(self.tok, actions=uses_actions(cfg.constrained_decoding, self.tok), thinking=cfg.thinking)
        base = model if model is not None else load_base(cfg.model, self.device, pick_dtype(cfg.dtype, self.device))
        self.model = add_lora(base, cfg.lora)
        self.grammar: ActionGrammar | None = None
        self.store = store or Store(cfg.s3)
        self.env = EnvClient(cfg.env_url)
        # Adapter names are per run (output URI), so trainers sharing one server never collide.
        self.server = PolicyServer(cfg.policy_server, "trace-" + hashlib.sha256(cfg.output_uri.encode()).hexdigest()[:10]) \
            if cfg.policy_server else None
        self.seed_key = cfg.seed_key if cfg.seed_key is not None else secrets.randbits(63)
        self.draw = random.Random(self.seed_key)
        self.optimizer = torch.optim.AdamW(trainable_parameters(self.model), lr=cfg.lr, weight_decay=cfg.weight_decay)
        warm = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.iteration = 0
        self.metrics: list[dict] = []
        self.checkpoint_uri: str | None = None
        self.init_adapter: str | None = None
        self.stop_requested = False
        self.env_name = "env"

    def resume(self, uri: str) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        ckpt = checkpoint.resolve(self.store, uri)
        with tempfile.TemporaryDirectory() as tmp:
            adapter_dir, state = checkpoint.load(self.store, ckpt, tmp)
            weights = load_file(f"{adapter_dir}/adapter_model.safetensors", device=str(self.device))
        set_peft_model_state_dict(self.model, weights)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        checkpoint.set_rng_state(state["rng"], self.draw)
        # Checkpoints from before the secret key drew from the run's seed.
        self.seed_key = state["rng"].get("seed_key", self.cfg.seed)
        self.iteration, self.metrics, self.checkpoint_uri = state["iteration"], state["metrics"], ckpt

    def init_from_adapter(self, uri: str) -> None:
        """The LoRA weights start from an earlier adapter (PEFT layout); optimizer, scheduler and
        iteration stay fresh, so this run trains its own budget on top of it."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        ours = self.model.peft_config["default"]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = Path(self.store.get_dir(uri, tmp))
                saved = json.loads((local / "adapter_config.json").read_text())
                weights = load_file(str(local / "adapter_model.safetensors"), device=str(self.device))
            except FileNotFoundError as e:
                raise ConfigError(f"init_adapter_uri: no PEFT adapter at {uri} ({e})") from e
        # Same rank, scale and adapted layers, or the loaded weights would not be the same adapter.
        for name, theirs, mine in (("r", saved.get("r"), ours.r), ("alpha", saved.get("lora_alpha"), ours.lora_alpha)):
            if theirs != mine:
                raise ConfigError(f"init_adapter_uri: the adapter at {uri} has {name}={theirs}, the configured lora.{name} is {mine}")
        theirs_t, mine_t = _module_names(saved.get("target_modules")), _module_names(ours.target_modules)
        if theirs_t != mine_t:
            raise ConfigError(f"init_adapter_uri: the adapter at {uri} adapts {theirs_t}, the configured lora.target_modules resolve to {mine_t}")
        loaded = set_peft_model_state_dict(self.model, weights)
        if loaded.unexpected_keys:
            raise ConfigError(f"init_adapter_uri: the adapter at {uri} has weights this model lacks, e.g. {loaded.unexpected_keys[0]}")
        self.init_adapter = uri

    def prepare(self, info: dict) -> None:
        """Per-env set-up from the env's info: its name and, under constrained decoding, the action grammar of its tools."""
        self.env_name = info["info"]["name"]
        if self.fmt.actions and self.grammar is None:
            self.grammar = ActionGrammar(self.tok, action_schema(info["tools"]), self.fmt.terminator_id, self.model.config.vocab_size)

    def heldout_seeds(self) -> list[int]:
        """The held-out seeds: drawn once from the run's seed key, at random in the training seed space,
        so a generated env cannot tell them apart (fixed 2**31 + i stood outside every seed validation
        draws: an env could be dishonest only there, rerun 14); `_starts` never draws them."""
        pick = random.Random(f"heldout-{self.seed_key}")
        seeds: list[int] = []
        while len(seeds) < self.cfg.heldout_seeds:
            s = pick.randrange(2**31)
            if s not in seeds:
                seeds.append(s)
        return seeds

    def _starts(self, tasks: list, n: int) -> list[dict]:
        if tasks:
            return [{"taskId": self.draw.choice(tasks)["id"]} for _ in range(n)]
        heldout = set(self.heldout_seeds())
        seeds: list[int] = []
        while len(seeds) < n:
            s = self.draw.randrange(2**31)
            if s not in heldout:
                seeds.append(s)
        return [{"seed": s} for s in seeds]

    def _save(self, rng: dict) -> str:
        self.checkpoint_uri = checkpoint.save(self.store, self.cfg.output_uri, self.iteration, self.model, self.optimizer,
                                              self.scheduler, {**rng, "seed_key": self.seed_key}, self.metrics)
        return self.checkpoint_uri

    def run(self) -> dict:
        cfg = self.cfg
        info = self.env.info()
        tasks = self.env.tasks()
        self.prepare(info)
        # A resumed run already holds its weights (and they descend from the init adapter).
        if cfg.init_adapter_uri and self.checkpoint_uri is None and self.init_adapter is None:
            self.init_from_adapter(cfg.init_adapter_uri)
        if cfg.save_trajectories:
            self.store.put_json(join(cfg.output_uri, "trajectories/env.json"), {"systemPrompt": info["systemPrompt"], "tools": info["tools"], "info": info["info"]})
        emit("started", iteration=self.iteration, iterations=cfg.iterations, device=str(self.device), resumed_from=self.checkpoint_uri,
             init_adapter=self.init_adapter)
        try:
            self._loop(info, tasks)
        finally:
            if self.server:
                self.server.close()
        adapter = join(self.checkpoint_uri, "adapter")
        files = {n: checkpoint.file_ref(self.store, join(adapter, n)) for n in ("adapter_config.json", "adapter_model.safetensors")}
        return {"adapter_uri": adapter, "adapter": files["adapter_model.safetensors"], "adapter_files": files,
                "checkpoint_uri": self.checkpoint_uri, "iterations": self.iteration, "metrics": self.metrics}

    def heldout_reward(self, info: dict) -> float:
        """Mean reward on the held-out seeds (`heldout_seeds`, never drawn for training),
        `heldout_rollouts` samples each, from a fixed torch seed so the curve compares weights, not
        luck. The global RNG is restored, so training draws are unchanged."""
        state = torch.get_rng_state()
        torch.manual_seed(self.cfg.seed + 7919)
        try:
            rollouts = collect(self._generator(), self.fmt, self.env, info, [{"seed": s} for s in self.heldout_seeds()],
                               rollouts_per_start=self.cfg.heldout_rollouts or self.cfg.rollouts_per_group, max_new_tokens=self.cfg.max_new_tokens,
                               max_turns=self.cfg.max_turns, max_errors=self.cfg.max_errors, max_seq_len=self.cfg.max_seq_len,
                               should_stop=lambda: self.stop_requested, grammar=self.grammar)
        finally:
            torch.set_rng_state(state)
        return float(np.mean([r.reward for r in rollouts]))

    def _loop(self, info: dict, tasks: list) -> None:
        cfg = self.cfg
        heldout = cfg.heldout_seeds > 0 and not tasks
        while self.iteration < cfg.iterations:
            rng_at_start = checkpoint.rng_state(self.draw)
            try:
                before = self.heldout_reward(info) if heldout and self.iteration == 0 else None
                m = self.step(info, tasks)
                if before is not None:
                    m["heldout_reward_before"] = before
                if heldout and ((self.iteration + 1) % cfg.heldout_every == 0 or self.iteration + 1 == cfg.iterations):
                    m["heldout_reward"] = self.heldout_reward(info)
            except Interrupted:
                # Nothing of this iteration is kept: the weights are untouched until the update, and
                # the RNG goes back to the iteration's start, so a resume repeats it exactly.
                checkpoint.set_rng_state(rng_at_start, self.draw)
                self._save(rng_at_start)
                emit("checkpoint", iteration=self.iteration, checkpoint_uri=self.checkpoint_uri)
                raise
            self.iteration += 1
            self.metrics.append(m)
            stop = self.stop_requested  # read once: a signal between the save and the exit must not skip the save
            if self.iteration % cfg.checkpoint_every == 0 or self.iteration == cfg.iterations or stop:
                self._save(checkpoint.rng_state(self.draw))
            emit("progress", iteration=self.iteration, **m, checkpoint_uri=self.checkpoint_uri)
            if stop and self.iteration < cfg.iterations:
                raise Interrupted()

    def _generator(self) -> Generate:
        """In-process sampling, or the policy server once it serves this iteration's weights (on-policy)."""
        if self.server is None:
            return in_process(self.model, self.fmt, self.cfg.temperature)
        self.server.publish(self.model, self.iteration)
        return self.server.sampler(self.fmt, self.cfg.temperature, self.draw)

    def _informative(self, rollouts: list[Rollout]) -> tuple[list[Rollout], list[float], int]:
        """The rollouts of groups with reward variance, their advantages, and how many such groups."""
        chosen, advs, n = [], [], 0
        for g in sorted({r.group for r in rollouts}):
            group = [r for r in rollouts if r.group == g]
            a = group_advantages([r.reward for r in group], self.cfg.adv_eps)
            if a is not None:
                chosen, advs, n = chosen + group, advs + a, n + 1
        return chosen, advs, n

    def step(self, info: dict, tasks: list) -> dict:
        cfg = self.cfg
        t0 = time.perf_counter()
        self.model.eval()
        generate = self._generator()

        def roll(n: int, first_group: int) -> list[Rollout]:
            return collect(generate, self.fmt, self.env, info, self._starts(tasks, n), rollouts_per_start=cfg.rollouts_per_group,
                           max_new_tokens=cfg.max_new_tokens, max_turns=cfg.max_turns, max_errors=cfg.max_errors,
                           max_seq_len=cfg.max_seq_len, should_stop=lambda: self.stop_requested, first_group=first_group,
                           grammar=self.grammar)

        drawn = roll(cfg.groups, 0)
        chosen, advs, informative = self._informative(drawn)
        first_informative, rollouts, resampled = informative, list(drawn), 0
        # DAPO dynamic sampling: groups from fresh seeds/tasks stand in for the zero-variance ones.
        while informative < cfg.groups and resampled < cfg.resample_groups:
            n = min(cfg.groups - informative, cfg.resample_groups - resampled)
            more = roll(n, cfg.groups + resampled)
            c, a, k = self._informative(more)
            rollouts, chosen, advs, informative, resampled = rollouts + more, chosen + c, advs + a, informative + k, resampled + n
        t_roll = time.perf_counter() - t0
        stats: dict = {}
        loss = self.update(chosen, advs, stats) if chosen else None
        sampled = sum(r.sampled_tokens for r in rollouts)
        if cfg.save_trajectories:
            self._write_trajectories(rollouts)
        elapsed = time.perf_counter() - t0
        # Reward, success and informative share describe the iteration's regular draw of `groups`
        # groups, so curves compare across resample settings; resampled groups count separately.
        return {
            "mean_reward": float(np.mean([r.reward for r in drawn])),
            "success_rate": float(np.mean([r.success for r in drawn])),
            "informative_share": first_informative / cfg.groups,
            "informative_groups": informative,
            "resampled_groups": resampled,
            "loss": loss,
            # Mean |log π_server − log π_trainer| over the sampled tokens (policy server only).
            **({"sampler_logprob_gap": stats["gap_sum"] / stats["gap_n"]} if stats.get("gap_n") else {}),
            "sampled_tokens": sampled,
            "tokens_per_s": sampled / elapsed if elapsed > 0 else 0.0,
            "rollout_tokens_per_s": sampled / t_roll if t_roll > 0 else 0.0,
            "iteration_s": elapsed,
        }

    def update(self, rollouts: list[Rollout], advantages: list[float], stats: dict | None = None) -> float:
        cfg = self.cfg
        self.model.train()
        pad = self.tok.pad_token_id
        # The grammar's allowed tokens at every sampled position, replayed from the sampled ids.
        allowed = [torch.cat([self.grammar.allowed(s) for s in r.samples]) for r in rollouts] if self.grammar else None
        old = None
        if cfg.minibatches > 1:  # later minibatches are off-policy: ratios against the sampling policy
            with torch.no_grad():
                old = [token_logprobs(self.model, [r.ids], [r.mask], pad, cfg.temperature,
                                      None if allowed is None else [allowed[i]], self.grammar)[0].cpu()
                       for i, r in enumerate(rollouts)]
        # The policy server's log-probs, where they are of the distribution it sampled from.
        served = self.server is not None and (self.server.cfg.logprobs == "processed" or cfg.temperature == 1.0)
        sampler = [torch.tensor(r.sample_logprobs) if r.sample_logprobs else None for r in rollouts] if served else None
        size = math.ceil(len(rollouts) / cfg.minibatches)
        total = 0.0
        for s in range(0, len(rollouts), size):
            self.optimizer.zero_grad(set_to_none=True)
            total += accumulate_gradients(self.model, rollouts[s: s + size], advantages[s: s + size], pad=pad,
                                          micro_batch_size=cfg.micro_batch_size, clip_low=cfg.clip_low, clip_high=cfg.clip_high,
                                          temperature=cfg.temperature, old_logps=None if old is None else old[s: s + size],
                                          allowed=None if allowed is None else allowed[s: s + size], grammar=self.grammar,
                                          sampler_logps=None if sampler is None else sampler[s: s + size], tis_cap=cfg.tis_cap, stats=stats)
            torch.nn.utils.clip_grad_norm_(trainable_parameters(self.model), cfg.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        return total / cfg.minibatches

    def _write_trajectories(self, rollouts: list[Rollout]) -> None:
        """Every rollout as a Trajectory (core/trajectory.ts) — the gate trains on the successful ones."""
        lines = []
        for i, r in enumerate(rollouts):
            lines.append(json.dumps({
                "id": f"iter{self.iteration + 1}-{i}", "env": self.env_name, "taskId": r.task_id, **({"seed": r.seed} if r.seed is not None else {}),
                "trial": i % self.cfg.rollouts_per_group, "model": self.cfg.model, "messages": r.messages, "reward": r.reward,
                "rewardInfo": r.reward_info, "success": r.success, "termination": r.termination,
                "usage": {"promptTokens": len(r.ids) - r.sampled_tokens, "completionTokens": r.sampled_tokens, "calls": r.steps},
                "steps": r.steps, "durationMs": 0,
            }))
        self.store.put_bytes(join(self.cfg.output_uri, f"trajectories/iter-{self.iteration + 1:06d}.jsonl"), ("\n".join(lines) + "\n").encode())
