"""GRPO learns: on a verifiable env (say the requested word; 0.3 for the other word), mean reward
rises by ≥ 0.3 over the untrained policy within a CI-sized budget. Fixed seeds; the curve is printed."""
import tempfile

from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.env_server import ServedEnv
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.tiny import save_tiny
from trace_trainer.toy_env import SayWordEnv


def test_grpo_raises_mean_reward(tmp_path):
    model_dir = save_tiny(str(tmp_path / "model"), ["say", "bye", "red", "blue"])
    served = ServedEnv(SayWordEnv(words=("red", "blue"), partial=0.3))
    try:
        cfg = from_dict(GrpoConfig, {"model": model_dir, "env_url": served.url, "output_uri": str(tmp_path / "out"), "iterations": 12,
                                     "groups": 8, "rollouts_per_group": 8, "lr": 2e-2, "max_new_tokens": 1, "max_turns": 1,
                                     "checkpoint_every": 100, "seed": 0, "seed_key": 0, "save_trajectories": False})
        trainer = GrpoTrainer(cfg)
        trainer.run()
    finally:
        served.close()
    curve = [m["mean_reward"] for m in trainer.metrics]
    success = [m["success_rate"] for m in trainer.metrics]
    print("learning curve (mean reward per iteration):", [round(r, 3) for r in curve])
    print("learning curve (success rate per iteration):", [round(r, 3) for r in success])
    # Iteration 1's rollouts come from the untrained policy: the baseline.
    gain = sum(curve[-4:]) / 4 - curve[0]
    assert gain >= 0.3, (gain, curve)
    assert sum(success[-4:]) / 4 > success[0] + 0.2


def test_held_out_score_draws_heldout_rollouts_per_seed(tmp_path, monkeypatch):
    import trace_trainer.grpo as grpo_mod

    model_dir = save_tiny(str(tmp_path / "model"), ["say", "bye", "red", "blue"])
    served = ServedEnv(SayWordEnv(words=("red", "blue"), partial=0.3))
    drawn = []
    real = grpo_mod.collect
    monkeypatch.setattr(grpo_mod, "collect", lambda *a, **kw: drawn.append((len(a[4]), kw["rollouts_per_start"], a[4])) or real(*a, **kw))
    try:
        cfg = from_dict(GrpoConfig, {"model": model_dir, "env_url": served.url, "output_uri": str(tmp_path / "out"), "iterations": 1,
                                     "groups": 2, "rollouts_per_group": 4, "max_new_tokens": 1, "max_turns": 1, "checkpoint_every": 100,
                                     "save_trajectories": False, "heldout_seeds": 3, "heldout_rollouts": 2})
        trainer = GrpoTrainer(cfg)
        trainer.run()
    finally:
        served.close()
    # Before training, the iteration's 2 groups of 4, after the last iteration: 3 seeds × 2 samples.
    assert [d[:2] for d in drawn] == [(3, 2), (2, 4), (3, 2)]
    # The held-out seeds lie at random in the training seed space (fixed 2**31 + i stood apart: a
    # generated env could be dishonest only there), the same before and after, never trained on.
    heldout = [s["seed"] for s in drawn[0][2]]
    assert heldout == [s["seed"] for s in drawn[-1][2]] == trainer.heldout_seeds() and len(set(heldout)) == 3
    assert all(0 <= s < 2**31 for s in heldout)
    assert not set(heldout) & {s["seed"] for s in drawn[1][2]}
    assert "heldout_reward_before" in trainer.metrics[0] and "heldout_reward" in trainer.metrics[-1]
    # With the config's seed (0 here) known to all, the seeds come from a key drawn per run and kept in
    # the checkpoint: a generated env that recomputed Random(0) paid wrong work on every training seed (rerun 17).
    other = GrpoTrainer(cfg)
    assert other.seed_key != trainer.seed_key and other.heldout_seeds() != heldout
    assert {s["seed"] for s in drawn[1][2]} != {s["seed"] for s in other._starts([], 2)}
    resumed = GrpoTrainer(cfg)
    resumed.resume(str(tmp_path / "out"))
    assert resumed.seed_key == trainer.seed_key and resumed.heldout_seeds() == heldout
