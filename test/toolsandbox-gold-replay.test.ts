import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from 'commander';
import { registerEnvCommands } from '../cli/env.js';

/** Runs `trace env replay <env> --gold --jsonl [--task id]` in-process and parses its JSON lines. */
async function replayGoldCli(env: string, task?: string): Promise<Record<string, unknown>[]> {
  let out = '';
  const program = new Command().exitOverride();
  registerEnvCommands(program, { out: (t) => (out += t) });
  await program.parseAsync([
    'node',
    'trace',
    'env',
    'replay',
    env,
    '--gold',
    '--jsonl',
    ...(task ? ['--task', task] : []),
  ]);
  return out
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** `trace env replay toolsandbox --gold --jsonl`: one line per base scenario, our score next to upstream's. */
test("toolsandbox gold replay: every base scenario listed; where a gold trajectory exists our similarity equals upstream's", async () => {
  const lines = await replayGoldCli('toolsandbox');
  assert.equal(lines.length, 129);
  const withGold = lines.filter((l) => l.similarity !== null);
  assert.equal(withGold.length, 129);
  for (const l of withGold) {
    assert.ok(Math.abs((l.similarity as number) - (l.upstream_similarity as number)) <= 1e-9, l.scenario as string);
    assert.match(l.db_hash as string, /^[0-9a-f]{64}$/);
  }
  assert.equal(withGold.filter((l) => l.perfect).length, 109);
  // The hash is of the final databases: two scenarios that change different things differ.
  assert.ok(new Set(withGold.map((l) => l.db_hash)).size > 20);
  const single = await replayGoldCli('toolsandbox-single_tool_call');
  assert.ok(
    single.length > 0 &&
      single.length < lines.length &&
      single.every((l) => (l.categories as string[]).includes('SINGLE_TOOL_CALL')),
  );
  const one = await replayGoldCli('toolsandbox', 'cellular_off');
  assert.deepEqual(
    one.map((l) => [l.scenario, l.similarity]),
    [['cellular_off', 1]],
  );
});
