"""`python -m trace_trainer` as the activity runs it: JSON lines, typed errors, SIGTERM → checkpoint → resume."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[1]


def _start(args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "trace_trainer", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, **kw)


def _events(proc):
    out, _ = proc.communicate(timeout=600)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], proc.returncode


def _config(tmp_path, model_dir, env_url, **kw):
    cfg = {"model": model_dir, "env_url": env_url, "output_uri": f"file://{tmp_path}/out", "iterations": 3, "groups": 2,
           "rollouts_per_group": 4, "lr": 5e-2, "max_new_tokens": 1, "max_turns": 1, "checkpoint_every": 1, "seed": 3, "seed_key": 3, **kw}
    path = tmp_path / "grpo.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_grpo_cli_emits_progress_and_a_peft_adapter(tmp_path, say_model_dir, say_env):
    events, rc = _events(_start(["grpo", "--config", _config(tmp_path, say_model_dir, say_env.url)]))
    assert rc == 0, events
    progress = [e for e in events if e["event"] == "progress"]
    assert [p["iteration"] for p in progress] == [1, 2, 3]
    for p in progress:
        assert {"mean_reward", "informative_share", "tokens_per_s", "loss", "checkpoint_uri"} <= set(p)
        assert p["checkpoint_uri"].endswith(f"iter-{p['iteration']:06d}")
    done = events[-1]
    assert done["event"] == "done" and done["adapter_uri"].endswith("iter-000003/adapter")
    assert done["peak_rss_mb"] > 50, "the trainer reports its peak memory (MiB)"
    assert len(done["adapter"]["sha256"]) == 64
    local = done["adapter_uri"][len("file://"):]
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(say_model_dir), local)
    assert any("lora_B" in n and float(p.abs().sum()) > 0 for n, p in model.named_parameters())


def test_bad_config_is_a_fatal_typed_error(tmp_path, say_model_dir, say_env):
    events, rc = _events(_start(["grpo", "--config", _config(tmp_path, say_model_dir, say_env.url, rollouts_per_group=1)]))
    assert rc == 1
    assert events[-1]["event"] == "error" and events[-1]["type"] == "fatal:ConfigError"
    assert "rollouts_per_group" in events[-1]["message"]
    events, rc = _events(_start(["grpo", "--config", str(tmp_path / "missing.json")]))
    assert events[-1]["type"] == "fatal:ConfigError" and "missing.json" in events[-1]["message"]


def test_a_bad_config_is_refused_before_torch_loads(tmp_path):
    """Importing torch and transformers takes ~10 s on 2 cores; a config error must not wait for it."""
    for cmd in ("grpo", "gate"):
        probe = ("import sys; from trace_trainer.__main__ import main; rc = main([%r, '--config', %r]); "
                 "print(rc, 'torch' in sys.modules)") % (cmd, str(tmp_path / "missing.json"))
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             timeout=600)
        assert out.stdout.splitlines()[-1] == "1 False", (cmd, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr, "a config error is one line, not a stack trace"


def test_unreachable_env_is_retryable(tmp_path, say_model_dir):
    events, rc = _events(_start(["grpo", "--config", _config(tmp_path, say_model_dir, "http://127.0.0.1:9")]))
    assert rc == 1 and events[-1]["type"] == "retryable:EnvUnavailable"


def test_sigterm_checkpoints_and_resume_finishes(tmp_path, say_model_dir, say_env):
    cfg = _config(tmp_path, say_model_dir, say_env.url, iterations=40, checkpoint_every=100)
    proc = _start(["grpo", "--config", cfg])
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1]["event"] == "progress" and seen[-1]["iteration"] == 2:
            proc.send_signal(signal.SIGTERM)
            break
    rest, rc = _events(proc)
    events = seen + rest
    assert rc == 1 and events[-1]["type"] == "retryable:Interrupted"
    ckpt = [e for e in events if e.get("checkpoint_uri")][-1]["checkpoint_uri"]
    stopped_at = int(ckpt[-6:])
    assert stopped_at >= 2, "the interrupted run must keep every finished iteration"
    cfg_short = _config(tmp_path, say_model_dir, say_env.url, iterations=stopped_at + 1, checkpoint_every=100)
    events, rc = _events(_start(["grpo", "--config", cfg_short, "--resume", f"file://{tmp_path}/out"]))
    assert rc == 0, events
    assert events[0]["event"] == "started" and events[0]["iteration"] == stopped_at
    assert [e["iteration"] for e in events if e["event"] == "progress"] == [stopped_at + 1]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_trainer_exits_when_its_parent_is_killed(tmp_path, say_model_dir, say_env):
    import time

    cfg = _config(tmp_path, say_model_dir, say_env.url, iterations=1000, checkpoint_every=1000)
    # The parent stands in for the worker: it starts the trainer in its own session, as the activity does.
    parent_code = (
        "import os, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'trace_trainer', 'grpo', '--config', {cfg!r}], start_new_session=True,\n"
        f"    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={{**os.environ, 'PYTHONPATH': {str(ROOT)!r}, 'TRACE_EXIT_WITH_PARENT': '1'}})\n"
        "print(p.pid, flush=True)\n"
        "p.wait()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    trainer_pid = int(parent.stdout.readline())
    time.sleep(3)
    assert _alive(trainer_pid)
    parent.kill()
    parent.wait()
    deadline = time.time() + 30
    while _alive(trainer_pid) and time.time() < deadline:
        time.sleep(0.2)
    alive = _alive(trainer_pid)
    if alive:
        os.kill(trainer_pid, signal.SIGKILL)
    assert not alive, "an orphaned trainer must stop on its own"
