"""One GRPO iteration of our trainer against one training step of TRL's GRPOTrainer, on CPU, in one
process, as a ratio (TRL seconds / ours; > 1 means ours is faster).

Both sides get the same model (SmolLM2-135M, the bundled GGUF dequantized to float32 by
`trace_trainer.model.load_base`, a fresh copy each), the same LoRA (r 8, alpha 16, all-linear, via
`trace_trainer.model.add_lora`), the same batch (4 prompts x 8 completions per update, micro-batches
of 8), the same completion limit (40 new tokens), temperature 1.0 and lr 5e-4, and the same prompts:
CopyCodeEnv's opening turn under the system prompt our trainer renders (the env's system prompt
plus the JSON-action tool instructions), through the tokenizer's chat template.
- ours: `GrpoTrainer.step` (sampling + update) on CopyCodeEnv served over HTTP by `ServedEnv`, as
  in trainer/tests/test_learning_smollm2.py; `iteration_s` and `sampled_tokens` come from step.
- TRL: `GRPOTrainer` with use_cpu, no vLLM, beta 0 (no reference model), gradient checkpointing
  off (TRL's default is on), bf16/fp16 off, logging and saving off; a step is timed from the
  callback's on_step_begin to on_step_end (generation of the 32 completions + 4 micro-batch
  forward/backward + optimizer step). Its reward is 1 when the completion contains the code.
The first iteration/step of each side is warm-up and is not counted.

NOT the same token stream: our sampler decodes under the JSON-action grammar (constrained
decoding, xgrammar: the completion ends once the action's JSON closes), TRL samples unconstrained
text until EOS or the 40-token limit. Same model, batch and lengths, so the sampled token counts
differ; tokens/s of each are printed beside the seconds. Our update also skips groups whose 8
rewards are all equal (zero advantage), so its cost varies with the rewards (`ours_informative_groups`,
and `ours_rollout_s_all` beside `ours_iteration_s_all` splits sampling from update); TRL computes the
loss of all 32 completions, and on CPU its fused LM head scores every position, prompt included. Both models
come from `load_base`, which also installs our grouped-query SDPA attention (attention.py), so
TRL's model runs that kernel too.

Set-up (TRL must not go into the repo's .venv: it could change torch/transformers there). A
separate venv that sees the repo's packages through a .pth file, then only TRL's missing deps:
  /root/.pyenv/versions/3.11.7/bin/python3 -m venv /work/.venv-trl   # any python3.11
  SP=$(/work/.venv-trl/bin/python -c "import site; print(site.getsitepackages()[0])")
  printf '%s\\n' "$PWD/.venv/lib/python3.11/site-packages" "$PWD/trainer" > "$SP/trace-main.pth"
  /work/.venv-trl/bin/pip install trl==1.16.0   # adds datasets, pandas, pyarrow, ...; torch untouched
(check with `pip install --dry-run trl==1.16.0` first that it would not replace torch or
transformers; if it would, use --no-deps and add the missing deps one by one.)

Usage, from the repo root:
  /work/.venv-trl/bin/python bench/trl-grpo.py [--iterations 3] [--steps 3] [--groups 4] [--rollouts 8]
      [--new 40] [--only ours|trl]
Prints one JSON line and a human-readable line (progress on stderr).

Measured 2026-12-01 on the 2-core dev box, nice -n 19 beside another CPU-heavy job (so absolute
times are inflated and noisy; both sides ran under the same load), trl 1.16.0, transformers 5.17.0,
torch 2.11.0, peft 0.21.2, defaults (4x8, 40 tokens, 3 each, first discarded): ours 44.8 s/iteration
(1014 sampled tokens; 3/4 and 2/4 groups updated), TRL 176.8 s/step (1104 tokens): TRL/ours = 3.95x.

TRL/transformers details handled here: transformers leaves a GGUF-loaded model marked quantized
and Trainer refuses to train it (`unmark_gguf`); the GGUF tokenizer's eos is <|im_start|>, so the
generation config gets our stop set; TRL's gradient checkpointing defaults on and is turned off."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "trainer"))

import trace_trainer  # noqa: E402,F401 — before torch: it sets the OpenMP wait policy (10-20x under CPU contention)

try:
    import trl  # noqa: E402
    from trl import GRPOConfig, GRPOTrainer  # noqa: E402
except ImportError as e:
    sys.exit(f"bench/trl-grpo.py: trl is not importable ({e}): install trl in a separate venv: see docstring")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from trace_trainer.chat import ChatFormat, uses_actions  # noqa: E402
from trace_trainer.config import GrpoConfig, LoraConfig, from_dict  # noqa: E402
from trace_trainer.env_server import ServedEnv  # noqa: E402
from trace_trainer.grpo import GrpoTrainer  # noqa: E402
from trace_trainer.model import add_lora, load_base, load_tokenizer, pick_device  # noqa: E402
from trace_trainer.toy_env import CopyCodeEnv  # noqa: E402

NOTE = ("same model, batch and lengths, not the same token stream: ours decodes under the JSON-action grammar "
        "(constrained, xgrammar), TRL samples unconstrained text")
LR, LORA_R, LORA_ALPHA, MICRO_BATCH = 5e-4, 8, 16, 8


def run_ours(a, tok) -> dict:
    served = ServedEnv(CopyCodeEnv())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = from_dict(GrpoConfig, {"model": a.model, "env_url": served.url, "output_uri": str(Path(tmp) / "out"),
                                         "iterations": a.iterations, "groups": a.groups, "rollouts_per_group": a.rollouts, "lr": LR,
                                         "lora": {"r": LORA_R, "alpha": LORA_ALPHA}, "max_new_tokens": a.new, "max_turns": 1,
                                         "checkpoint_every": 10**6, "seed": 0, "save_trajectories": False, "device": "cpu",
                                         "constrained_decoding": "auto", "micro_batch_size": MICRO_BATCH, "heldout_seeds": 0})
            trainer = GrpoTrainer(cfg, model=load_base(a.model, pick_device("cpu"), torch.float32), tokenizer=tok)
            info, tasks = trainer.env.info(), trainer.env.tasks()
            trainer.prepare(info)
            ms = []
            for i in range(a.iterations):
                m = trainer.step(info, tasks)
                ms.append(m)
                print(f"ours iteration {i}: {m['iteration_s']:.2f}s, {m['sampled_tokens']} sampled tokens, "
                      f"{m['rollout_tokens_per_s']:.1f} rollout tok/s, reward {m['mean_reward']:.3f}, "
                      f"{m['informative_groups']}/{a.groups} groups updated", file=sys.stderr, flush=True)
    finally:
        served.close()
    return {"constrained": trainer.fmt.actions, "iterations": ms}


class StepTimer(TrainerCallback):
    def __init__(self):
        self.begin: float | None = None
        self.times: list[float] = []

    def on_step_begin(self, args, state, control, **kw):
        self.begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self.begin)
        print(f"trl step {len(self.times) - 1}: {self.times[-1]:.2f}s", file=sys.stderr, flush=True)


def trl_prompts(tok, n: int) -> tuple[list[dict], int]:
    """n distinct CopyCodeEnv openings (seeds 1..n) under the system content our trainer renders, and
    the token length of the first as our ChatFormat encodes it (to check both sides see the same prompt)."""
    env = CopyCodeEnv()
    fmt = ChatFormat(tok, actions=uses_actions("auto", tok))
    system = fmt.system_content(env.system_prompt(), env.tools())
    rows = []
    for seed in range(1, n + 1):
        ep = env.reset(seed)
        rows.append({"prompt": [{"role": "system", "content": system}] + ep.initial_messages(), "code": ep.code})
    ours_len = len(fmt.prompt_ids(env.system_prompt(), env.tools(), rows[0]["prompt"][1:]))
    return rows, ours_len


def unmark_gguf(model):
    """transformers dequantizes a GGUF checkpoint to plain float32 weights at load but leaves the model
    marked quantized (hf_quantizer GGUF), and its Trainer refuses to train a GGUF-quantized model;
    our trainer never asks. The weights are float32 tensors, so the mark is dropped."""
    assert all(p.dtype == torch.float32 for p in model.parameters())
    model.is_quantized, model.hf_quantizer = False, None
    for attr in ("quantization_method",):
        if hasattr(model, attr):
            delattr(model, attr)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def run_trl(a, tok) -> dict:
    per_step = a.groups * a.rollouts
    rows, ours_prompt_len = trl_prompts(tok, a.groups * a.steps)
    trl_prompt_len = len(tok.apply_chat_template(rows[0]["prompt"], tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"])
    tokens: list[int] = []
    rewards: list[float] = []

    def contains_code(completions, code, completion_ids, **kw):
        tokens.append(sum(len(ids) for ids in completion_ids))
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        r = [1.0 if k in t else 0.0 for t, k in zip(texts, code)]
        rewards.append(sum(r) / len(r))
        return r

    torch.manual_seed(0)
    base = unmark_gguf(load_base(a.model, pick_device("cpu"), torch.float32))
    # The GGUF tokenizer's eos is <|im_start|>; TRL stops at the generation config's eos ids plus the
    # tokenizer's, so it gets our sampler's stop set (<|endoftext|>, <|im_start|>, <|im_end|>).
    stop_ids = ChatFormat(tok).stop_ids
    base.generation_config.eos_token_id = stop_ids
    model = add_lora(base, LoraConfig(r=LORA_R, alpha=LORA_ALPHA))
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(output_dir=tmp, max_steps=a.steps, per_device_train_batch_size=MICRO_BATCH,
                          gradient_accumulation_steps=per_step // MICRO_BATCH, num_generations=a.rollouts,
                          max_completion_length=a.new, temperature=1.0, top_p=1.0, top_k=0, learning_rate=LR,
                          lr_scheduler_type="constant", warmup_steps=0, beta=0.0, epsilon=0.2, epsilon_high=0.28,
                          use_vllm=False, use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False,
                          logging_strategy="no", save_strategy="no", report_to=[], disable_tqdm=True, seed=0,
                          shuffle_dataset=False, dataloader_num_workers=0, log_completions=False)
        trainer = GRPOTrainer(model=model, reward_funcs=contains_code, args=args, train_dataset=Dataset.from_list(rows),
                              processing_class=tok, callbacks=[timer])
        assert sorted(trainer.eos_token_ids) == stop_ids, (trainer.eos_token_ids, stop_ids)
        trainer.train()
    for i, (n, r) in enumerate(zip(tokens, rewards)):
        print(f"trl step {i}: {n} completion tokens, reward {r:.3f}", file=sys.stderr, flush=True)
    return {"times": timer.times, "tokens": tokens, "rewards": rewards, "prompt_tokens": trl_prompt_len, "stop_ids": stop_ids,
            "ours_prompt_tokens": ours_prompt_len}


def mean(xs):
    return statistics.fmean(xs) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser(description="one GRPO iteration of ours vs one TRL GRPOTrainer step, on CPU")
    ap.add_argument("--model", default=str(ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--iterations", type=int, default=3, help="our iterations; the first is warm-up")
    ap.add_argument("--steps", type=int, default=3, help="TRL steps; the first is warm-up")
    ap.add_argument("--groups", type=int, default=4, help="prompts per update")
    ap.add_argument("--rollouts", type=int, default=8, help="completions per prompt (TRL num_generations)")
    ap.add_argument("--new", type=int, default=40, help="max new tokens (TRL max_completion_length)")
    ap.add_argument("--only", choices=["ours", "trl"], help="run one side only")
    a = ap.parse_args()
    if (a.groups * a.rollouts) % MICRO_BATCH:
        ap.error(f"groups x rollouts must be a multiple of the micro-batch size {MICRO_BATCH}")
    if min(a.iterations, a.steps) < 2:
        ap.error("--iterations and --steps must be >= 2 (the first is warm-up)")
    tok = load_tokenizer(a.model)
    out = {"bench": "trl_grpo_step", "model": Path(a.model).name, "device": "cpu", "torch_threads": torch.get_num_threads(),
           "groups": a.groups, "rollouts_per_group": a.rollouts, "completions_per_update": a.groups * a.rollouts,
           "micro_batch_size": MICRO_BATCH, "max_new_tokens": a.new, "trl": trl.__version__, "note": NOTE}
    if a.only != "trl":
        ours = run_ours(a, tok)
        kept = ours["iterations"][1:]
        s = mean([m["iteration_s"] for m in kept])
        toks = mean([m["sampled_tokens"] for m in kept])
        out.update({"ours_constrained_decoding": ours["constrained"], "ours_s_per_iteration": s, "ours_sampled_tokens": toks,
                    "ours_tok_s": toks / s, "ours_rollout_tok_s": mean([m["rollout_tokens_per_s"] for m in kept]),
                    "ours_informative_groups": [m["informative_groups"] for m in kept],
                    "ours_iteration_s_all": [round(m["iteration_s"], 3) for m in ours["iterations"]],
                    # step's rollout time is sampled_tokens / rollout_tokens_per_s; the rest is the update
                    "ours_rollout_s_all": [round(m["sampled_tokens"] / m["rollout_tokens_per_s"], 3) for m in ours["iterations"]]})
    if a.only != "ours":
        t = run_trl(a, tok)
        s = mean(t["times"][1:])
        toks = mean(t["tokens"][1:])
        out.update({"trl_s_per_step": s, "trl_sampled_tokens": toks, "trl_tok_s": toks / s if toks is not None else None,
                    "trl_step_s_all": [round(x, 3) for x in t["times"]], "trl_mean_reward": mean(t["rewards"][1:]),
                    "stop_ids": t["stop_ids"], "prompt_tokens": t["prompt_tokens"],
                    "prompt_tokens_ours_format": t["ours_prompt_tokens"]})
    if "ours_s_per_iteration" in out and "trl_s_per_step" in out:
        out["ratio_trl_over_ours"] = out["trl_s_per_step"] / out["ours_s_per_iteration"]
    print(json.dumps(out), flush=True)
    parts = []
    if "ours_s_per_iteration" in out:
        parts.append(f"ours {out['ours_s_per_iteration']:.2f}s/iteration ({out['ours_sampled_tokens']:.0f} sampled tokens)")
    if "trl_s_per_step" in out:
        parts.append(f"TRL {trl.__version__} {out['trl_s_per_step']:.2f}s/step ({out['trl_sampled_tokens']:.0f} sampled tokens)")
    ratio = f"; TRL/ours = {out['ratio_trl_over_ours']:.2f}x" if "ratio_trl_over_ours" in out else ""
    print(f"{' vs '.join(parts)}{ratio} — {a.groups}x{a.rollouts} completions, <= {a.new} new tokens, CPU, "
          f"first of each discarded; {NOTE}", flush=True)


if __name__ == "__main__":
    main()
