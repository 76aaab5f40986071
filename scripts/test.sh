#!/usr/bin/env bash
# `npm test`: set-up, then every test under test/ with node's built-in runner (trainer pytest runs
# as one of those tests, so the closing summary covers everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mapfile -t files < <(find test -name '*.test.ts' -not -path '*/node_modules/*' | sort)
exec node --import tsx --test --test-concurrency=1 --test-timeout=900000 "$@" "${files[@]}"
