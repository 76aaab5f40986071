"""Checkpoints and resume: 2 iterations + checkpoint + resume + 2 iterations == 4 uninterrupted,
locally and on a real S3-compatible server (moto in server mode, a separate process)."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.grpo import GrpoTrainer
from trace_trainer.storage import Store


def _cfg(model_dir, env_url, out, iterations, **kw):
    return from_dict(GrpoConfig, {"model": model_dir, "env_url": env_url, "output_uri": out, "iterations": iterations, "groups": 2,
                                  "rollouts_per_group": 4, "lr": 5e-2, "max_new_tokens": 1, "max_turns": 1, "checkpoint_every": 2,
                                  "seed": 7, "seed_key": 7, **kw})


def _adapter(store, uri):
    ckpt = store.get_json(uri.rstrip("/") + "/checkpoints/latest.json")["uri"]
    local = store.get_dir(ckpt + "/adapter", str(Path(os.environ.get("TMPDIR", "/tmp")) / f"ad-{time.time_ns()}"))
    return load_file(str(Path(local) / "adapter_model.safetensors")), store.get_json(ckpt + "/adapter/adapter_config.json")


def _resume_equivalence(model_dir, env_url, out_a, out_b, store, **kw):
    full = GrpoTrainer(_cfg(model_dir, env_url, out_a, 4, **kw), store=store)
    full.run()
    first = GrpoTrainer(_cfg(model_dir, env_url, out_b, 2, **kw), store=store)
    first.run()
    second = GrpoTrainer(_cfg(model_dir, env_url, out_b, 4, **kw), store=store)
    second.resume(out_b)
    assert second.iteration == 2
    second.run()
    wa, ca = _adapter(store, out_a)
    wb, _ = _adapter(store, out_b)
    assert wa.keys() == wb.keys() and len(wa) > 0
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    assert any(float(v.abs().sum()) > 0 for k, v in wa.items() if "lora_B" in k), "training must have moved the adapter"
    assert [m["mean_reward"] for m in full.metrics] == [m["mean_reward"] for m in second.metrics]
    assert [m["resampled_groups"] for m in full.metrics] == [m["resampled_groups"] for m in second.metrics]
    assert ca["r"] == 16 and ca["lora_alpha"] == 16
    return full


def test_resume_is_bit_for_bit_locally(say_model_dir, say_env, tmp_path):
    full = _resume_equivalence(say_model_dir, say_env.url, str(tmp_path / "a"), f"file://{tmp_path}/b", Store())
    ckpts = sorted(p.name for p in (tmp_path / "a/checkpoints").iterdir() if not p.name.startswith("."))
    assert ckpts == ["iter-000002", "iter-000004", "latest.json"]
    state = torch.load(tmp_path / "a/checkpoints/iter-000004/trainer_state.pt", weights_only=False)
    assert set(state) == {"iteration", "optimizer", "scheduler", "rng", "metrics"} and state["iteration"] == 4
    assert set(state["rng"]) == {"python", "numpy", "torch", "cuda", "draw", "seed_key"} and state["rng"]["seed_key"] == 7
    lines = (tmp_path / "a/trajectories/iter-000004.jsonl").read_text().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["messages"][0]["role"] == "user"
    assert full.metrics[-1]["sampled_tokens"] > 0


def test_resume_with_dynamic_sampling_is_bit_for_bit(say_model_dir, say_env, tmp_path):
    full = _resume_equivalence(say_model_dir, say_env.url, str(tmp_path / "a"), str(tmp_path / "b"), Store(), resample_groups=3)
    assert any(m["resampled_groups"] for m in full.metrics), "the case must exercise resampling"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def s3_server():
    port = _free_port()
    exe = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_resume_is_bit_for_bit_on_s3(say_model_dir, say_env, s3_server):
    from trace_trainer.config import S3Config

    store = Store(S3Config(endpoint=s3_server, force_path_style=True))
    store.s3.create_bucket(Bucket="trace")
    _resume_equivalence(say_model_dir, say_env.url, "s3://trace/runs/r1/a", "s3://trace/runs/r1/b", store)
    keys = [o["Key"] for o in store.s3.list_objects_v2(Bucket="trace", Prefix="runs/r1/b/checkpoints/")["Contents"]]
    assert "runs/r1/b/checkpoints/iter-000004/adapter/adapter_model.safetensors" in keys
