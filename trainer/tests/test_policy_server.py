"""GRPO with rollouts on a policy server (`python -m trace_trainer serve --enable-lora`, a real
process on loopback, speaking vLLM's runtime-LoRA and token-id completion API): every rollout
phase samples from the adapter just trained, and the trained ids and masks are exactly what the
server returned."""
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import torch

import trace_trainer.grpo as grpo
from trace_trainer.config import GrpoConfig, from_dict
from trace_trainer.events import TrainerError
from trace_trainer.grpo import GrpoTrainer, token_logprobs
from trace_trainer.sampler import sample
from trace_trainer.serve import load_policy, make_server

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def policy_server(say_model_dir):
    proc = subprocess.Popen([sys.executable, "-m", "trace_trainer", "serve", "--model", say_model_dir, "--enable-lora", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        event = {}
        for line in proc.stdout:  # ends if the server dies before listening
            if line.startswith("{"):
                event = json.loads(line)
                break
        assert event.get("event") == "listening", event
        yield event["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _call(url, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"content-type": "application/json"}, method="POST" if data else "GET")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _cfg(model_dir, env_url, out, server_url, lora_dir, **kw):
    return from_dict(GrpoConfig, {"model": model_dir, "env_url": env_url, "output_uri": str(out), "iterations": 3, "groups": 2,
                                  "rollouts_per_group": 4, "lr": 5e-2, "max_new_tokens": 3, "max_turns": 1, "checkpoint_every": 100,
                                  "seed": 5, "seed_key": 5, "save_trajectories": False,
                                  "policy_server": {"base_url": server_url, "lora_dir": str(lora_dir)}, **kw})


def test_grpo_samples_from_the_adapter_just_trained(say_model_dir, say_env, policy_server, tmp_path, monkeypatch):
    trainer = GrpoTrainer(_cfg(say_model_dir, say_env.url, tmp_path / "out", policy_server, tmp_path / "loras"))
    fmt, eos = trainer.fmt, trainer.tok.eos_token_id
    probe = fmt.prompt_ids("reply with the word", [], [{"role": "user", "content": "say red"}])
    served_versions, probe_logprobs = [], []

    publish_and_sample = trainer._generator

    def checked_generator():
        generate = publish_and_sample()
        name = trainer.server.current
        served_versions.append(name)
        listed = [m["id"] for m in _call(policy_server, "/models")["data"]]
        assert listed[1:] == [name], "only the current version is loaded"
        assert sorted(p.name for p in (tmp_path / "loras").iterdir()) == [name]
        out = _call(policy_server, "/completions", {"model": name, "prompt": probe, "max_tokens": 4, "temperature": 0, "logprobs": 0,
                                                     "return_tokens_as_token_ids": True})["choices"][0]
        ids = [int(t.split(":")[1]) for t in out["logprobs"]["tokens"]]
        # The served adapter is the in-process one: same greedy ids, same log-probabilities.
        [local_ids] = sample(trainer.model, [probe], max_new_tokens=4, temperature=0.0, stop_ids={eos}, pad_id=trainer.tok.pad_token_id).ids
        with torch.no_grad():
            scored = [0] * len(probe) + [1] * len(ids)
            local_lp = token_logprobs(trainer.model, [probe + ids], [scored], trainer.tok.pad_token_id, 1.0)[0, len(probe) - 1:].tolist()
        assert ids == local_ids
        assert out["logprobs"]["token_logprobs"] == pytest.approx(local_lp, abs=1e-4)
        probe_logprobs.append(local_lp)
        return generate

    trainer._generator = checked_generator
    answers = []  # every /v1/completions request the trainer sent, with the server's raw answer
    post = trainer.server._post
    lock = threading.Lock()

    def recording_post(path, body):
        status, out = post(path, body)
        if path == "/v1/completions":
            with lock:
                answers.append((json.loads(json.dumps(body)), out))  # as sent: the rollout's ids grow afterwards
        return status, out

    trainer.server._post = recording_post
    rollouts = []
    collect = grpo.collect

    def recording_collect(*a, **kw):
        got = collect(*a, **kw)
        rollouts.extend(got)
        return got

    monkeypatch.setattr(grpo, "collect", recording_collect)
    trainer.run()

    assert served_versions == [f"{trainer.server.prefix}-v{i}" for i in range(3)]
    # At temperature 1 the server's raw log-probs are the sampling policy's: the update weighs
    # tokens by truncated importance sampling, and the measured mismatch is float noise (measured
    # in the update: an iteration without informative groups has none).
    gaps = [m["sampler_logprob_gap"] for m in trainer.metrics if m["loss"] is not None]
    assert gaps and all(g < 1e-3 for g in gaps), [m.get("sampler_logprob_gap") for m in trainer.metrics]
    assert probe_logprobs[0] != probe_logprobs[-1], "training must have moved the served adapter"
    assert [m["id"] for m in _call(policy_server, "/models")["data"]] == ["trace-base"], "a finished trainer unloads its adapter"
    assert not list((tmp_path / "loras").iterdir())
    assert len(answers) == len(rollouts) == 3 * 2 * 4
    returned = Counter()
    for body, out in answers:
        assert body["model"] in served_versions and body["return_tokens_as_token_ids"] is True and isinstance(body["seed"], int)
        returned[(tuple(body["prompt"]), tuple(int(t.split(":")[1]) for t in out["choices"][0]["logprobs"]["tokens"]))] += 1
    trained = Counter()
    for r in rollouts:
        assert len(r.ids) == len(r.mask) and len(r.samples) == 1
        start = r.mask.index(1)
        sampled = r.ids[start: start + len(r.samples[0])]
        assert sampled == r.samples[0] and r.mask[start: start + len(sampled)] == [1] * len(sampled)
        assert sum(r.mask) == len(sampled), "the mask covers exactly the returned ids"
        trained[(tuple(r.ids[:start]), tuple(sampled))] += 1
    assert trained == returned


def test_a_server_without_runtime_lora_is_a_fatal_error(say_model_dir, say_env, tmp_path):
    server = make_server(load_policy(say_model_dir))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        trainer = GrpoTrainer(_cfg(say_model_dir, say_env.url, tmp_path / "out", url, tmp_path / "loras", iterations=1))
        with pytest.raises(TrainerError) as e:
            trainer.run()
    finally:
        server.shutdown()
    assert e.value.type == "fatal:PolicyServerRejected" and "--enable-lora" in str(e.value)


def test_config_errors_name_the_field():
    from trace_trainer.events import ConfigError

    base = {"model": "m", "env_url": "http://e", "output_uri": "o"}
    for extra, field in (({"policy_server": {"base_url": "http://s"}}, "config.policy_server.lora_dir: required"),
                         ({"policy_server": {"base_url": "s:8000", "lora_dir": "d"}}, "config.policy_server.base_url:"),
                         ({"policy_server": {"base_url": "http://s", "lora_dir": "d", "api_key": "k"}}, "config.policy_server.api_key: unknown"),
                         ({"resample_groups": -1}, "config.resample_groups:")):
        with pytest.raises(ConfigError) as e:
            from_dict(GrpoConfig, {**base, **extra})
        assert str(e.value).startswith(field), str(e.value)
    cfg = from_dict(GrpoConfig, {**base, "policy_server": {"base_url": "http://s/v1", "lora_dir": "d"}})
    assert cfg.policy_server.lora_dir == "d" and cfg.resample_groups == 0


def test_processed_logprobs_are_those_of_the_tempered_distribution(say_model_dir):
    """serve --logprobs-mode processed_logprobs (vLLM's flag) reports log softmax(logits / T), the
    distribution it sampled from, which the trainer's importance weights need at T != 1."""
    policy = load_policy(say_model_dir, logprobs_mode="processed_logprobs")
    prompt = policy.fmt.prompt_ids("reply with the word", [], [{"role": "user", "content": "say red"}])
    out = policy.completion({"prompt": prompt, "max_tokens": 3, "temperature": 0.5, "logprobs": 0, "return_tokens_as_token_ids": True, "seed": 1})
    lp = out["choices"][0]["logprobs"]
    ids = [int(t.split(":")[1]) for t in lp["tokens"]]
    with torch.no_grad():
        want = token_logprobs(policy.model, [prompt + ids], [[0] * len(prompt) + [1] * len(ids)], policy.tok.pad_token_id, 0.5)
    assert lp["token_logprobs"] == pytest.approx(want[0, len(prompt) - 1:].tolist(), abs=1e-4)
    raw = load_policy(say_model_dir).completion({"prompt": prompt + ids[:0], "max_tokens": 3, "temperature": 0.5, "logprobs": 0,
                                                  "return_tokens_as_token_ids": True, "seed": 1})
    assert raw["choices"][0]["logprobs"]["token_logprobs"] != lp["token_logprobs"]
