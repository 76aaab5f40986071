"""GRPO learns on the real SmolLM2-135M (the bundled GGUF, dequantized), under constrained decoding:
on CopyCodeEnv (submit the user's code exactly) the trainer's held-out mean reward, on seeds never
trained on, rises by a real margin. Fixed seeds; both curves are printed."""
import torch

from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.env_server import ServedEnv
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.model import load_base, pick_device
from trace_trainer.toy_env import CopyCodeEnv

from conftest import SMOLLM2_GGUF


def test_grpo_raises_held_out_reward_of_smollm2(smol_tok, tmp_path):
    served = ServedEnv(CopyCodeEnv())
    try:
        cfg = from_dict(GrpoConfig, {"model": str(SMOLLM2_GGUF), "env_url": served.url, "output_uri": str(tmp_path / "out"),
                                     "iterations": 4, "groups": 4, "rollouts_per_group": 8, "lr": 5e-4, "lora": {"r": 8, "alpha": 16},
                                     "max_new_tokens": 40, "max_turns": 1, "checkpoint_every": 100, "seed": 0, "seed_key": 0, "save_trajectories": False,
                                     "constrained_decoding": "auto", "micro_batch_size": 8, "heldout_seeds": 8, "heldout_rollouts": 4, "heldout_every": 4})
        trainer = GrpoTrainer(cfg, model=load_base(str(SMOLLM2_GGUF), pick_device("cpu"), torch.float32), tokenizer=smol_tok)
        assert trainer.fmt.actions, "SmolLM2's template has no tool format: auto must turn constrained decoding on"
        trainer.run()
    finally:
        served.close()
    m = trainer.metrics
    before, after = m[0]["heldout_reward_before"], m[-1]["heldout_reward"]
    curve = [round(x["mean_reward"], 3) for x in m]
    print(f"SmolLM2 on {CopyCodeEnv.name}: held-out mean reward {before:.3f} -> {after:.3f}; training curve {curve}")
    assert 0.1 <= before <= 0.7, f"the env must be calibrated for the base policy, got {before}"
    assert after >= before + 0.2, (before, after, curve)
