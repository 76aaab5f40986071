"""Trainer speed on SmolLM2-135M (the bundled GGUF), each figure a ratio against a baseline run in
this process on the same batch:
- grouped sampling (an iteration's batch: G groups of K rollouts, the G prompts sharing a system
  prompt and tools block and differing in the user's message; one prefill of the shared prefix,
  one of each group's tail, finished rows leaving the batch, logits only at the sampled position)
  against Hugging Face `generate` sampling the same [G·K, prompt] batch;
- the training forward+backward of a group (shared prompt once) against the plain batched
  forward+backward of the same K sequences.
Usage: .venv/bin/python bench/trainer-speed.py [--groups 4] [--k 8] [--prompt 175] [--tail 16] [--new 32] [--repeats 2]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "trainer"))

from trace_trainer import grpo  # noqa: E402 — before torch: it sets the OpenMP wait policy
import torch  # noqa: E402
from trace_trainer.config import LoraConfig  # noqa: E402
from trace_trainer.model import add_lora, load_base, load_tokenizer  # noqa: E402
from trace_trainer.rollout import Rollout  # noqa: E402
from trace_trainer.sampler import sample  # noqa: E402


def best(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--tail", type=int, default=16, help="tokens of each group's own user message at the end of the prompt")
    ap.add_argument("--prompt", type=int, default=175)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(2)
    tok = load_tokenizer(a.model)
    model = load_base(a.model, torch.device("cpu"), torch.float32)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, 40000, (a.prompt,), generator=g).tolist()
    shared = prompt[: a.prompt - a.tail]
    prompts = [shared + torch.randint(100, 40000, (a.tail,), generator=g).tolist() for _ in range(a.groups)]
    rows = [p for p in prompts for _ in range(a.k)]
    batch = torch.tensor(rows)

    def ours():
        sample(model, rows, max_new_tokens=a.new, temperature=1.0, stop_ids=set(), pad_id=tok.pad_token_id)

    def hf():
        with torch.no_grad():
            model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                           max_new_tokens=a.new, min_new_tokens=a.new, pad_token_id=tok.pad_token_id)

    tokens = len(rows) * a.new
    t_ours, t_hf = best(ours, a.repeats), best(hf, a.repeats)
    print(json.dumps({"bench": "grouped_sampling", "groups": a.groups, "k": a.k, "tail": a.tail, "prompt": a.prompt, "new": a.new, "ours_tok_s": tokens / t_ours,
                      "hf_generate_tok_s": tokens / t_hf, "ratio_vs_hf_generate": t_hf / t_ours}), flush=True)

    lora = add_lora(model, LoraConfig(r=8, alpha=16))
    rs = [Rollout(group=0, seed=0, task_id="t", ids=prompt + torch.randint(100, 40000, (a.new,), generator=g).tolist(),
                  mask=[0] * a.prompt + [1] * a.new, messages=[], sampled_tokens=a.new) for _ in range(a.k)]

    def train(shared: bool):
        grpo.MIN_SHARED_PREFIX = 16 if shared else 10**9
        lora.zero_grad()
        grpo.accumulate_gradients(lora, rs, [1.0, -1.0] * (a.k // 2), pad=tok.pad_token_id, micro_batch_size=a.k, clip_low=0.2, clip_high=0.28)

    t_shared, t_plain = best(lambda: train(True), a.repeats), best(lambda: train(False), a.repeats)
    grpo.MIN_SHARED_PREFIX = 16
    seq_tokens = a.k * (a.prompt + a.new)
    print(json.dumps({"bench": "group_fwd_bwd", "k": a.k, "sequence_tokens": seq_tokens, "shared_prefix_tok_s": seq_tokens / t_shared,
                      "plain_tok_s": seq_tokens / t_plain, "ratio_vs_plain": t_plain / t_shared}), flush=True)


if __name__ == "__main__":
    main()
