"""init_adapter_uri: scheduled retraining continues an earlier run's adapter. The LoRA weights start
from it (fresh optimizer, iteration 0), training moves on from there, a mismatched LoRA is refused
naming the field, and a resume point wins over it."""
import pytest
import torch
from peft import get_peft_model_state_dict
from safetensors.torch import load_file

from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.events import ConfigError
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.storage import Store


def _cfg(model_dir, env_url, out, iterations=2, **kw):
    return from_dict(GrpoConfig, {"model": model_dir, "env_url": env_url, "output_uri": out, "iterations": iterations, "groups": 2,
                                  "rollouts_per_group": 4, "lr": 5e-2, "max_new_tokens": 1, "max_turns": 1, "checkpoint_every": 1,
                                  "seed": 7, "seed_key": 7, "lora": {"r": 4, "alpha": 8}, **kw})


def _weights(trainer) -> dict:
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(trainer.model).items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture()
def source(say_model_dir, say_env, tmp_path):
    """A previous run's adapter (PEFT directory) after 2 GRPO iterations."""
    done = GrpoTrainer(_cfg(say_model_dir, say_env.url, str(tmp_path / "previous"))).run()
    weights = load_file(f"{done['adapter_uri']}/adapter_model.safetensors")
    assert any(float(v.abs().sum()) > 0 for k, v in weights.items() if "lora_B" in k), "the source adapter must have been trained"
    return done["adapter_uri"], weights


def test_weights_start_from_the_adapter_and_training_continues(say_model_dir, say_env, tmp_path, source):
    uri, src = source
    cfg = _cfg(say_model_dir, say_env.url, f"file://{tmp_path}/next", init_adapter_uri=uri)
    trainer = GrpoTrainer(cfg)
    trainer.init_from_adapter(uri)
    after_init = _weights(trainer)
    assert after_init.keys() == src.keys()
    for k in src:
        assert torch.equal(after_init[k], src[k]), k
    assert trainer.iteration == 0 and not trainer.optimizer.state, "fresh optimizer, iteration 0"

    done = trainer.run()
    assert done["iterations"] == 2 and len(done["metrics"]) == 2
    assert done["checkpoint_uri"].endswith("checkpoints/iter-000002")
    continued = load_file(str(tmp_path / "next/checkpoints/iter-000002/adapter/adapter_model.safetensors"))
    assert not _same(continued, src), "training must move the continued adapter"
    # The same 2 iterations from a fresh adapter end elsewhere: the starting point carried through.
    fresh = GrpoTrainer(_cfg(say_model_dir, say_env.url, str(tmp_path / "fresh"))).run()
    assert not _same(continued, load_file(f"{fresh['adapter_uri']}/adapter_model.safetensors"))


def test_run_applies_init_adapter_uri_from_the_config(say_model_dir, say_env, tmp_path, source):
    uri, src = source
    trainer = GrpoTrainer(_cfg(say_model_dir, say_env.url, str(tmp_path / "next"), iterations=1, lr=1e-30, init_adapter_uri=uri))
    trainer.run()
    assert trainer.init_adapter == uri
    # A negligible learning rate leaves the loaded weights where they were.
    after = _weights(trainer)
    for k in src:
        assert torch.allclose(after[k], src[k], atol=1e-6), k


@pytest.mark.parametrize("lora, field", [({"r": 8, "alpha": 8}, "lora.r"), ({"r": 4, "alpha": 4}, "lora.alpha"),
                                         ({"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}, "lora.target_modules")])
def test_a_mismatched_lora_is_refused_naming_the_field(say_model_dir, say_env, tmp_path, source, lora, field):
    uri, _ = source
    trainer = GrpoTrainer(_cfg(say_model_dir, say_env.url, str(tmp_path / "next"), lora=lora, init_adapter_uri=uri))
    with pytest.raises(ConfigError) as e:
        trainer.run()
    msg = str(e.value)
    assert msg.startswith("init_adapter_uri:") and field in msg and "\n" not in msg, msg
    assert not e.value.retryable


def test_a_missing_adapter_is_refused_naming_the_field(say_model_dir, say_env, tmp_path):
    trainer = GrpoTrainer(_cfg(say_model_dir, say_env.url, str(tmp_path / "next"), init_adapter_uri=str(tmp_path / "nowhere")))
    with pytest.raises(ConfigError, match=r"^init_adapter_uri: no PEFT adapter at"):
        trainer.run()


def test_resume_wins_over_init_adapter_uri(say_model_dir, say_env, tmp_path, source):
    uri, src = source
    out = str(tmp_path / "attempt")
    # An earlier attempt of this run stopped after 1 iteration (started fresh, so unlike the source).
    GrpoTrainer(_cfg(say_model_dir, say_env.url, out, iterations=1)).run()
    ckpt = load_file(str(tmp_path / "attempt/checkpoints/iter-000001/adapter/adapter_model.safetensors"))
    assert not _same(ckpt, src)
    retry = GrpoTrainer(_cfg(say_model_dir, say_env.url, out, iterations=1, init_adapter_uri=uri))
    retry.resume(out)
    retry.run()  # nothing left to train: the weights are the checkpoint's
    assert retry.init_adapter is None
    assert _same(_weights(retry), ckpt)
    assert Store().exists(f"{out}/checkpoints/latest.json")
