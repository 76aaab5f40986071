import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execa } from 'execa';
import { PROJECT_ROOT } from '../infra/temporal.js';

// The trainer's Python tests (trainer/tests) run here so the node summary covers them. Its GRPO
// run on SmolLM2 takes minutes on 2 cores; the limit is generous so a busy machine does not trip it.
test('trainer pytest suite passes', { timeout: 3_600_000 }, async () => {
  const python = path.join(PROJECT_ROOT, '.venv', 'bin', 'python');
  const r = await execa(python, ['-m', 'pytest', 'tests', '-q', '-s', '-p', 'no:cacheprovider', '--durations=12'], {
    cwd: path.join(PROJECT_ROOT, 'trainer'),
    reject: false,
    all: true,
    env: { OMP_NUM_THREADS: '2' },
  });
  // pytest exits 5 when it collected no tests: that is a failure too.
  assert.equal(r.exitCode, 0, `pytest exited ${r.exitCode}:\n${r.all?.split('\n').slice(-40).join('\n')}`);
  assert.match(r.all ?? '', /\d+ passed/);
  // The learning curve is part of the result the issue asks for; keep it visible in the log.
  // So are the slowest tests: the suite's time on 2 cores is watched (pytest's --durations block).
  const lines = (r.all ?? '').split('\n');
  const slowest = lines.findIndex((l) => l.includes('slowest 12 durations'));
  for (const [i, line] of lines.entries()) {
    const at = Math.max(line.indexOf('learning curve'), line.indexOf('SmolLM2 on'));
    if (at >= 0) console.log(line.slice(at));
    else if (slowest >= 0 && i >= slowest && i <= slowest + 12) console.log(line);
  }
});
