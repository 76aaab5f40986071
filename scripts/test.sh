#!/usr/bin/env bash
# `npm test`: set-up, then every test under test/ with node's built-in runner (trainer pytest runs
# as one of those tests, so the closing summary covers everything), and whether the tree is
# formatted (Prettier, .prettierrc.json / .prettierignore): checked first, reported last, so a
# formatting slip neither hides the test results nor passes unnoticed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
formatted=0
node_modules/.bin/prettier --check . --log-level warn || formatted=1
mapfile -t files < <(find test -name '*.test.ts' -not -path '*/node_modules/*' | sort)
status=0
node --import tsx --test --test-concurrency=1 --test-timeout=900000 "$@" "${files[@]}" || status=$?
if [ "$formatted" -ne 0 ]; then
  echo "[test] the files listed above are not formatted: npx prettier --write <file>" >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
