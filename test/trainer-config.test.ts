import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execa } from 'execa';
import { ConfigSchema } from '../core/config.js';
import { TRAINER_DEFAULTS, gateTrainerConfig, grpoTrainerConfig } from '../core/trainer-config.js';
import { PROJECT_ROOT } from '../infra/temporal.js';

// Every optional part set, so the conditional fields of the mapping appear too.
const config = ConfigSchema.parse({
  name: 'mapping',
  env: { name: 'showcase-desk' },
  store: { kind: 's3', bucket: 'b', endpoint: 'http://127.0.0.1:9000' },
  training: {
    tokenizer: 'tok',
    heldoutSeeds: 4,
    policyServer: {
      baseURL: 'http://127.0.0.1:8000/v1',
      loraDir: 'loras',
      serverLoraDir: '/srv/loras',
      apiKeyEnv: 'KEY',
    },
  },
});
const paths = { resolve: (n: string) => `/abs/${n}`, absolute: (d: string) => `/abs/${d}` };
const grpo = grpoTrainerConfig(config, {
  ...paths,
  envUrl: 'http://127.0.0.1:1',
  outputUri: 's3://b/out',
  initAdapterUri: 's3://b/prev',
});
const gate = gateTrainerConfig(config, {
  ...paths,
  adapters: [{ name: 'c', uri: 's3://b/a' }],
  trajectories: ['s3://b/t'],
  outputUri: 's3://b/g',
});

/** The dataclass fields of trainer/trace_trainer/config.py, and whether from_dict accepts `value`. */
async function trainerSide(
  cls: string,
  value: unknown,
): Promise<{ fields: string[]; lora?: string[]; error?: string }> {
  const script = `
import dataclasses, json, sys
from trace_trainer import config as c
from trace_trainer.events import ConfigError
cls = getattr(c, sys.argv[1])
out = {"fields": [f.name for f in dataclasses.fields(cls)], "lora": [f.name for f in dataclasses.fields(c.LoraConfig)]}
try:
    c.from_dict(cls, json.loads(sys.argv[2]))
except ConfigError as e:
    out["error"] = str(e)
print(json.dumps(out))`;
  const r = await execa(path.join(PROJECT_ROOT, '.venv', 'bin', 'python'), ['-c', script, cls, JSON.stringify(value)], {
    env: { PYTHONPATH: path.join(PROJECT_ROOT, 'trainer') },
  });
  return JSON.parse(r.stdout);
}

test('every GrpoConfig field is set from the run config or named as a trainer default, and the trainer accepts it', async () => {
  const py = await trainerSide('GrpoConfig', grpo);
  assert.equal(py.error, undefined);
  const mapped = Object.keys(grpo);
  const kept = Object.keys(TRAINER_DEFAULTS.grpo);
  assert.deepEqual(
    mapped.filter((k) => kept.includes(k)),
    [],
    'a field is both mapped and left at its default',
  );
  assert.deepEqual([...mapped, ...kept].sort(), [...py.fields].sort());
  // LoRA: every field but target_modules (PEFT's "all-linear", as the paper's code).
  assert.deepEqual(Object.keys(grpo.lora as object).sort(), py.lora!.filter((f) => f !== 'target_modules').sort());
  assert.equal(grpo.heldout_rollouts, config.training.rolloutsPerGroup, 'held-out samples default to rolloutsPerGroup');
});

test('every GateConfig field is set from the run config or named as a trainer default, and the trainer accepts it', async () => {
  const py = await trainerSide('GateConfig', gate);
  assert.equal(py.error, undefined);
  const mapped = Object.keys(gate);
  const kept = Object.keys(TRAINER_DEFAULTS.gate);
  assert.deepEqual(
    mapped.filter((k) => kept.includes(k)),
    [],
  );
  assert.deepEqual([...mapped, ...kept].sort(), [...py.fields].sort());
});
