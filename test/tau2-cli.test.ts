import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Command } from 'commander';
import { registerEnvCommands } from '../cli/env.js';

async function run(...args: string[]): Promise<string> {
  let out = '';
  const program = new Command().exitOverride();
  registerEnvCommands(program, { out: (t) => void (out += t) });
  await program.parseAsync(['node', 'trace', ...args]);
  return out;
}

test('env replay --gold --jsonl prints tau2-bench-identical lines', async () => {
  const out = await run('env', 'replay', 'tau2-mock', '--gold', '--jsonl');
  assert.equal(out, readFileSync(new URL('./fixtures/tau2/gold-replay-mock-current.jsonl', import.meta.url), 'utf8'));
  const one = await run('env', 'replay', 'tau2-airline', '--gold', '--task', '11', '--task-set', 'legacy', '--jsonl');
  const expected = readFileSync(
    new URL('./fixtures/tau2/gold-replay-airline-legacy.jsonl', import.meta.url),
    'utf8',
  ).split('\n');
  assert.equal(one, `${expected.find((l) => l.startsWith('{"task_id": "11",'))}\n`);
  const parsed = JSON.parse(one) as {
    task_id: string;
    db_hash: string;
    calls: { name: string; error: boolean; output: string }[];
  };
  assert.equal(parsed.task_id, '11');
  assert.match(parsed.db_hash, /^[0-9a-f]{64}$/);
});

test('env list and env show describe the tau2 environments', async () => {
  const list = await run('env', 'list');
  assert.match(list, /^tau2-airline\t50 tasks\t14 tools\t/m);
  assert.match(list, /^tau2-retail\t114 tasks\t16 tools\t/m);
  assert.match(list, /^tau2-mock\t10 tasks\t4 tools\t/m);
  const show = await run('env', 'show', 'tau2-airline');
  assert.match(show, /tasks: 50 \(train 30, test 20\)/);
  assert.match(show, /WRITE {3}book_reservation/);
  assert.match(show, /READ {4}get_user_details/);
  assert.match(show, /GENERIC transfer_to_human_agents/);
});

test('env list/show/replay cover showcase-desk and the reference capability environments', async () => {
  const { REFERENCE_ENVS } = await import('../envs/reference/index.js');
  const list = await run('env', 'list');
  assert.match(list, /^toy-orders\t8 tasks\t5 tools\t/m);
  assert.match(list, /^showcase-desk\t44 tasks\t2 tools\t/m);
  for (const cap of Object.keys(REFERENCE_ENVS))
    assert.match(list, new RegExp(`^${cap}\t[a-z-]+\ttarget [a-z0-9-]+\t\\d+ tools\t`, 'm'));
  assert.match(list, /^exact_id_copying\tdesk-cancel-by-code\ttarget showcase-desk\t2 tools\t/m);
  assert.match(list, /^lookup_then_act\tdesk-cancel-by-name\ttarget showcase-desk\t2 tools\t/m);

  const show = await run('env', 'show', 'showcase-desk');
  assert.match(show, /tasks: 44 \(train 20, test 24\)/);
  assert.match(show, /^ {2}find_booking\(guest\)$/m);
  assert.match(show, /^ {2}cancel_booking\(booking_code\)$/m);
  for (const name of [...Object.keys(REFERENCE_ENVS), 'desk-cancel-by-name', 'airline-spend-audit']) {
    const ref = await run('env', 'show', name);
    assert.match(ref, /^capability: [a-z_]+\ntarget: [a-z0-9-]+\n/m, name);
    assert.match(ref, /tasks: seeded generator/);
  }
  assert.match(await run('env', 'show', 'desk-cancel-by-name'), /capability: lookup_then_act\ntarget: showcase-desk/);

  const lines = (await run('env', 'replay', 'showcase-desk', '--gold'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(lines.length, 44);
  assert.ok(lines.every((l) => l.reward === 1 && l.calls.every((c: { error: boolean }) => !c.error)));
  const one = JSON.parse(await run('env', 'replay', 'showcase-desk', '--gold', '--task', 'desk-01'));
  assert.deepEqual(
    one.calls.map((c: { name: string }) => c.name),
    ['find_booking', 'cancel_booking'],
  );
  const seeds = (await run('env', 'replay', 'lookup_then_act', '--gold', '--seeds', '3'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    seeds.map((l) => [l.task_id, l.reward]),
    [
      ['seed-0', 1],
      ['seed-1', 1],
      ['seed-2', 1],
    ],
  );
  await assert.rejects(
    run('env', 'replay', 'showcase-desk', '--gold', '--task', 'desk-99'),
    /--task: task 'desk-99' not found in showcase-desk/,
  );
  await assert.rejects(
    run('env', 'replay', 'lookup_then_act', '--gold', '--seeds', '0'),
    /--seeds: expected a positive integer, got '0'/,
  );
});

test('env commands reject unknown environments and task sets with one-line errors', async () => {
  await assert.rejects(run('env', 'show', 'tau2-telecom'), /env: 'tau2-telecom' is not a built-in target environment/);
  await assert.rejects(
    run('env', 'replay', 'tau2-retail', '--gold', '--task-set', 'old'),
    /--task-set: expected 'current' or 'legacy'/,
  );
  await assert.rejects(run('env', 'replay', 'tau2-retail', '--gold', '--task', 'nope'), /task 'nope' not found/);
});

test('the registry opens tau2-* names with the config (task set, roles) and rejects unknown domains', async () => {
  const { parseConfig } = await import('../core/config.js');
  const { openEnvironment } = await import('../envs/registry.js');
  const config = parseConfig({ env: { name: 'tau2-airline', taskSet: 'legacy' } });
  const env = await openEnvironment(config.env, { config });
  assert.equal(env.info.name, 'tau2-airline');
  assert.equal((await env.listTasks()).length, 50);
  assert.match(env.info.description, /legacy tasks/);
  const bad = parseConfig({ env: { name: 'tau2-telecom' } });
  await assert.rejects(openEnvironment(bad.env, { config: bad }), /env\.name: unknown tau2 environment 'tau2-telecom'/);
});
