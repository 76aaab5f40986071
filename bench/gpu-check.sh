#!/usr/bin/env bash
# Device check for the trainer (needs CUDA and torch/transformers/peft/safetensors; downloads nothing):
# GRPO + LoRA on a model built from a config, tokens/s and peak memory, a gate fit, CPU-vs-CUDA match.
# Prints one JSON line per check; exits non-zero when a check fails. Usage: bash bench/gpu-check.sh
# Smoke test of the script itself on CPU (~15 s; the default sizes are for an H200 and take > 7 min on CPU):
#   bash bench/gpu-check.sh --device cpu --hidden 64 --layers 2 --groups 2 --k 4 --max-new-tokens 16
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
export PYTHONPATH="$PWD/trainer${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec timeout 450 "$PY" -m trace_trainer.gpu_check "$@"
