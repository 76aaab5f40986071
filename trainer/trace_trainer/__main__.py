"""python -m trace_trainer {grpo,gate,serve,tiny}: JSON-line events on stdout, logs on stderr.
A failure ends with {"event":"error","type":"retryable:<Name>"|"fatal:<Name>","message"}."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from .events import ConfigError, classify, emit, peak_rss_mb


def _grpo(args) -> None:
    from .config import GrpoConfig, load_config

    cfg = load_config(GrpoConfig, args.config)  # before torch loads: a bad config fails in a second, not ten
    from .grpo import GrpoTrainer

    trainer = GrpoTrainer(cfg)

    def stop(signum, _frame):  # finish or abandon the current iteration, checkpoint, exit retryable
        print(f"[trace_trainer] signal {signum}: checkpointing and stopping", file=sys.stderr, flush=True)
        trainer.stop_requested = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.resume:
        trainer.resume(args.resume)
    emit("done", **trainer.run(), peak_rss_mb=peak_rss_mb())


def _gate(args) -> None:
    from .config import GateConfig, load_config

    cfg = load_config(GateConfig, args.config)  # before torch loads, as for grpo
    from .gate import fit_gate

    emit("done", **fit_gate(cfg), peak_rss_mb=peak_rss_mb())


def _serve(args) -> None:
    from .serve import serve

    serve(model=args.model, tokenizer=args.tokenizer, adapter=args.adapter, gate=args.gate, host=args.host, port=args.port,
          name=args.name, device=args.device, enable_lora=args.enable_lora, constrained_decoding={"on": True, "off": False}.get(args.constrained_decoding, "auto"),
          logprobs_mode=args.logprobs_mode)


def _tiny(args) -> None:
    from .tiny import TOOL_WORDS, save_tiny

    words = args.words.split(",") if args.words else TOOL_WORDS
    save_tiny(args.out, words, hidden=args.hidden, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
              intermediate=args.intermediate, seed=args.seed)
    emit("done", model=os.path.abspath(args.out))


def _exit_with_parent() -> None:
    """The activity starts the trainer in its own process group, so a worker killed with SIGKILL
    would leave it running beside the retry's trainer; orphaned, it stops at once (the retry
    resumes from the last checkpoint)."""
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main(argv=None) -> int:
    if os.environ.get("TRACE_EXIT_WITH_PARENT") == "1":
        _exit_with_parent()
    p = argparse.ArgumentParser(prog="python -m trace_trainer")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grpo", help="train one LoRA adapter with multi-turn GRPO")
    g.add_argument("--config", required=True)
    g.add_argument("--resume", help="checkpoint URI, or the artifact prefix of an earlier attempt (uses its latest checkpoint)")
    m = sub.add_parser("gate", help="fit the LoRA-MoE gate over frozen adapters")
    m.add_argument("--config", required=True)
    s = sub.add_parser("serve", help="OpenAI-compatible chat and token-id completions for base, base+adapter or base+gate (runtime LoRA adapters with --enable-lora)")
    s.add_argument("--model", required=True)
    s.add_argument("--tokenizer")
    s.add_argument("--adapter", help="PEFT adapter directory or URI")
    s.add_argument("--gate", help="gate directory or URI (gate_manifest.json + gates.safetensors)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--name", help="model id reported by /v1/models (default: derived from the variant)")
    s.add_argument("--device", default="auto")
    s.add_argument("--enable-lora", dest="enable_lora", action="store_true",
                   help="load/unload LoRA adapters at runtime by name (vLLM's /v1/load_lora_adapter) and serve them over the base")
    s.add_argument("--constrained-decoding", dest="constrained_decoding", choices=["on", "off", "auto"], default="off",
                   help="answer chat requests with tools under the JSON action grammar, as the trainer samples "
                        "(training.constrainedDecoding; auto = on when the chat template has no tool format)")
    s.add_argument("--logprobs-mode", dest="logprobs_mode", choices=["raw_logprobs", "processed_logprobs"], default="raw_logprobs",
                   help="as vLLM's: /v1/completions log-probs of the raw logits (default) or of the tempered distribution sampled from")
    t = sub.add_parser("tiny", help="write a tiny randomly initialised model + tokenizer directory")
    t.add_argument("--out", required=True)
    t.add_argument("--words", help="comma-separated extra vocabulary (default: the tool-call vocabulary)")
    t.add_argument("--hidden", type=int, default=64)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--kv-heads", dest="kv_heads", type=int, default=2)
    t.add_argument("--intermediate", type=int, default=128)
    t.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        {"grpo": _grpo, "gate": _gate, "serve": _serve, "tiny": _tiny}[args.cmd](args)
        return 0
    except BaseException as e:  # noqa: BLE001 — every failure must reach the activity as one typed line
        if isinstance(e, SystemExit) and e.code in (0, None):
            return 0
        err = classify(e)
        if not isinstance(e, ConfigError):  # a bad config is said in one line; anything else keeps its trace
            import traceback

            traceback.print_exc(file=sys.stderr)
        emit("error", type=err.type, message=str(err))
        return 1


if __name__ == "__main__":
    sys.exit(main())
