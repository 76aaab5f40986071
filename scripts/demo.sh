#!/usr/bin/env bash
# `npm run demo`: set-up (idempotent), the embedded stack (Temporal + Web UI on 127.0.0.1:8233,
# local LLM on 127.0.0.1:8765, embedded worker; reused when already up), then configs/demo.yaml
# run to completion with a progress bar. Prints where the report is and the UI link.
# Extra arguments go to `trace demo` (e.g. --config my.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node cli/trace.mjs demo "$@"
