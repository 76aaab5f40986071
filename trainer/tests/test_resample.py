"""DAPO dynamic sampling: zero-variance groups are replaced by groups from fresh seeds, within the
per-iteration budget, deterministically."""
import json

from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.env_server import ServedEnv
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.toy_env import SayWordEnv


class HalfConstantEnv(SayWordEnv):
    """Even seeds score 0.5 whatever the reply, so their groups never carry a learning signal."""

    def reset(self, seed: int):
        episode = super().reset(seed)
        if seed % 2 == 0:
            episode.evaluate = lambda messages, termination: {"reward": 0.5, "components": {}, "success": False}
        return episode


def _train(model_dir, url, out, resample_groups):
    cfg = from_dict(GrpoConfig, {"model": model_dir, "env_url": url, "output_uri": str(out), "iterations": 2, "groups": 4,
                                 "rollouts_per_group": 8, "lr": 5e-2, "max_new_tokens": 1, "max_turns": 1, "checkpoint_every": 100,
                                 "seed": 11, "seed_key": 11, "resample_groups": resample_groups})
    trainer = GrpoTrainer(cfg)
    trainer.run()
    return trainer.metrics


def test_resampling_fills_the_update_with_informative_groups(say_model_dir, tmp_path):
    served = ServedEnv(HalfConstantEnv(partial=0.3))
    try:
        plain = _train(say_model_dir, served.url, tmp_path / "plain", 0)
        dapo = _train(say_model_dir, served.url, tmp_path / "dapo", 16)
    finally:
        served.close()
    print("informative groups without / with resampling:", [m["informative_groups"] for m in plain], [m["informative_groups"] for m in dapo])
    assert all(m["resampled_groups"] == 0 and m["informative_groups"] == m["informative_share"] * 4 for m in plain)
    assert sum(m["informative_groups"] for m in dapo) > sum(m["informative_groups"] for m in plain)
    for m in dapo:
        assert m["informative_groups"] <= 4 and m["resampled_groups"] <= 16
        assert m["resampled_groups"] > 0, "about half the seeds are constant, so every iteration needs resampling"
        assert m["informative_groups"] == 4 or m["resampled_groups"] == 16, "stops only when full or out of budget"
    # The regular draw comes first and is the same with or without resampling (same seed, same weights).
    assert (dapo[0]["informative_share"], dapo[0]["mean_reward"]) == (plain[0]["informative_share"], plain[0]["mean_reward"])
    # Every resampled group's rollouts are kept as trajectories, from seeds not in the regular draw.
    lines = [json.loads(x) for x in (tmp_path / "dapo/trajectories/iter-000001.jsonl").read_text().splitlines()]
    assert len(lines) == (4 + dapo[0]["resampled_groups"]) * 8
    regular, extra = {t["seed"] for t in lines[:32]}, {t["seed"] for t in lines[32:]}
    assert extra and not regular & extra
