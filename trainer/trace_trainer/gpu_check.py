"""Device check (python -m trace_trainer.gpu_check): GRPO with a LoRA on a small model built from a
config, on CUDA, with tokens/s and peak memory; then the CUDA path against the CPU path on the same
rollouts (loss, gradients, MoE-gate logits). Needs torch, transformers, peft, safetensors; no network."""
from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time

import torch

from .config import GateConfig, GrpoConfig, LoraConfig, from_dict
from .env_server import ServedEnv
from .gate import fit_gate
from .moe import attach_moe, read_adapter, set_top1
from .grpo import GrpoTrainer, accumulate_gradients, group_advantages
from .model import add_lora, trainable_parameters
from .rollout import collect
from .sampler import in_process
from .storage import Store
from .chat import ChatFormat
from .envclient import EnvClient
from .tiny import TOOL_WORDS, build_model, build_tokenizer
from .toy_env import SayWordEnv

WORDS = ["say", "bye", "red", "blue"]


def report(**kw):
    print(json.dumps(kw), flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--max-new-tokens", dest="max_new_tokens", type=int, default=128)
    p.add_argument("--device", default="cuda", help="cpu only to smoke-test this script itself")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        report(check="cuda", ok=False, message="no CUDA device")
        return 1
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    report(check="device", ok=True, device=torch.cuda.get_device_name(0) if cuda else "cpu", torch=torch.__version__)
    peak = (lambda: round(torch.cuda.max_memory_allocated() / 2**30, 3)) if cuda else (lambda: None)
    reset_peak = torch.cuda.reset_peak_memory_stats if cuda else (lambda: None)
    tok = build_tokenizer(WORDS)
    # Learning, CPU-vs-device and gate checks use the configuration the CPU tests use (tests/test_learning.py:
    # mean reward +0.3 or more within 12 iterations); the throughput check uses the larger --hidden/--layers model.
    mk = dict(pad_id=tok.pad_token_id, eos_id=tok.eos_token_id)
    big = dict(hidden=args.hidden, layers=args.layers, heads=8, kv_heads=4, intermediate=4 * args.hidden)
    served = ServedEnv(SayWordEnv(words=("red", "blue"), partial=0.3))
    ok = True
    try:
        with tempfile.TemporaryDirectory() as out:
            # 1. GRPO on CUDA: learning curve, throughput, memory.
            reset_peak()
            cfg = from_dict(GrpoConfig, {"model": "built-in", "env_url": served.url, "output_uri": out, "iterations": args.iterations,
                                         "groups": 8, "rollouts_per_group": 8, "lr": 2e-2, "max_new_tokens": 1, "max_turns": 1,
                                         "checkpoint_every": args.iterations, "seed": 0, "device": args.device})
            trainer = GrpoTrainer(cfg, model=build_model(len(tok), **mk).to(dev), tokenizer=tok)
            t0 = time.perf_counter()
            result = trainer.run()
            curve = [round(m["mean_reward"], 3) for m in trainer.metrics]
            gain = sum(curve[-3:]) / 3 - sum(curve[:2]) / 2
            report(check=f"grpo_{dev.type}", ok=gain >= 0.3 or not cuda, curve=curve, gain=round(gain, 3), seconds=round(time.perf_counter() - t0, 1),
                   tokens_per_s=round(sum(m["sampled_tokens"] for m in trainer.metrics) / sum(m["iteration_s"] for m in trainer.metrics), 1),
                   peak_mem_gib=peak(), adapter=result["adapter_uri"])
            ok &= gain >= 0.3 or not cuda

            # 1b. Throughput with long multi-turn rollouts (a tool env; random model, so advantages are set ±1).
            from .toy_env import CounterEnv

            counter = ServedEnv(CounterEnv(turns=3))
            try:
                ctok = build_tokenizer(TOOL_WORDS)
                cmodel = add_lora(build_model(len(ctok), **big, pad_id=ctok.pad_token_id, eos_id=ctok.eos_token_id).to(dev), LoraConfig())
                cenv = EnvClient(counter.url)
                t0 = time.perf_counter()
                cfmt = ChatFormat(ctok)
                rs = collect(in_process(cmodel, cfmt, 1.0), cfmt, cenv, cenv.info(), [{"seed": s} for s in range(args.groups)],
                             rollouts_per_start=args.k, max_new_tokens=args.max_new_tokens, max_turns=3, max_errors=3, max_seq_len=4096)
                if cuda:
                    torch.cuda.synchronize()
                t_gen = time.perf_counter() - t0
                t0 = time.perf_counter()
                accumulate_gradients(cmodel, rs, [1.0 if i % 2 else -1.0 for i in range(len(rs))], pad=ctok.pad_token_id,
                                     micro_batch_size=32, clip_low=0.2, clip_high=0.28)
                if cuda:
                    torch.cuda.synchronize()
                t_train = time.perf_counter() - t0
                report(check="throughput", ok=True, hidden=args.hidden, layers=args.layers, rollouts=len(rs), sampled_tokens=sum(r.sampled_tokens for r in rs),
                       sampled_tokens_per_s=round(sum(r.sampled_tokens for r in rs) / t_gen, 1),
                       train_tokens_per_s=round(sum(len(r.ids) for r in rs) / t_train, 1), peak_mem_gib=peak())
            finally:
                counter.close()

            # 2. The CUDA path against the CPU path on identical rollouts (float32 both).
            cpu_model = add_lora(build_model(len(tok), **mk), LoraConfig(r=16, alpha=16))
            with torch.no_grad():
                for n, prm in cpu_model.named_parameters():
                    if "lora_B" in n:
                        prm.normal_(0, 0.02)
            env = EnvClient(served.url)
            torch.manual_seed(1)
            fmt = ChatFormat(tok)
            rollouts = collect(in_process(cpu_model, fmt, 1.0), fmt, env, env.info(), [{"seed": s} for s in range(8)], rollouts_per_start=8,
                               max_new_tokens=4, max_turns=1, max_errors=1, max_seq_len=512)
            chosen, advs = [], []
            for g in range(8):
                grp = [r for r in rollouts if r.group == g]
                a = group_advantages([r.reward for r in grp], 1e-6)
                if a is not None:
                    chosen, advs = chosen + grp, advs + a
            cuda_model = copy.deepcopy(cpu_model).to(dev)
            losses, grads = [], []
            for m in (cpu_model, cuda_model):
                m.zero_grad()
                losses.append(accumulate_gradients(m, chosen, advs, pad=tok.pad_token_id, micro_batch_size=16, clip_low=0.2, clip_high=0.28))
                grads.append(torch.cat([q.grad.flatten().cpu() for q in trainable_parameters(m)]))
            rel = float((grads[0] - grads[1]).norm() / grads[0].norm().clamp_min(1e-12))
            match = abs(losses[0] - losses[1]) < 1e-4 and rel < 1e-3
            report(check="cpu_vs_cuda_grpo_step", ok=match, informative_rollouts=len(chosen), loss_cpu=losses[0], loss_cuda=losses[1], grad_rel_diff=rel)
            ok &= match

            # 3. A gate over two adapters, fitted on CUDA; its top-1 logits match on CPU.
            adapters = []
            for i in range(2):
                torch.manual_seed(20 + i)
                a = add_lora(build_model(len(tok), **mk), LoraConfig(r=8, alpha=16))
                with torch.no_grad():
                    for n, prm in a.named_parameters():
                        if "lora_B" in n:
                            prm.normal_(0, 0.05)
                a.save_pretrained(f"{out}/adapter-{i}")
                adapters.append({"name": f"a{i}", "uri": f"{out}/adapter-{i}"})
            gcfg = from_dict(GateConfig, {"model": "built-in", "adapters": adapters, "trajectories": [f"{out}/trajectories"], "output_uri": out,
                                          "steps": 50, "lr": 1e-2, "batch_size": 8, "device": args.device})
            t0 = time.perf_counter()
            reset_peak()
            g = fit_gate(gcfg, model=build_model(len(tok), **mk).to(dev), tokenizer=tok, store=Store())
            report(check=f"gate_{dev.type}", ok=True, seconds=round(time.perf_counter() - t0, 1), last=g["history"],
                   peak_mem_gib=peak())
            from safetensors.torch import load_file

            state = load_file(f"{out}/gate/gates.safetensors")
            ids = torch.tensor([chosen[0].ids if chosen else rollouts[0].ids])
            logits = []
            for d in ("cpu", dev.type):
                m = build_model(len(tok), **mk).to(d)
                layers = attach_moe(m, [read_adapter(a["uri"])[0] for a in adapters])
                for n, layer in layers.items():
                    layer.gate.load_state_dict({"weight": state[f"{n}.weight"], "bias": state[f"{n}.bias"]})
                set_top1(layers, True)
                with torch.no_grad():
                    logits.append(m(input_ids=ids.to(d)).logits.float().cpu())
            diff = float((logits[0] - logits[1]).abs().max())
            report(check="cpu_vs_cuda_gate_logits", ok=diff < 1e-3, max_abs_diff=diff)
            ok &= diff < 1e-3
    finally:
        served.close()
    report(check="summary", ok=bool(ok))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
