import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { gpuCount, torchThreadsEnv, trainerSlots } from '../infra/cpu-share.js';

// This suite runs where `nvidia-smi` is absent (CI, no GPU): the CPU-only sharing is what it checks.
const cpuOnly = gpuCount({}) === 0;
const cores = os.availableParallelism();

test(
  'without a GPU the trace-gpu worker runs two trainers (one on a 1-core machine), or TRACE_CPU_TRAINERS',
  { skip: !cpuOnly && 'a GPU is visible' },
  () => {
    assert.equal(trainerSlots({}), Math.min(2, cores));
    assert.equal(trainerSlots({ TRACE_CPU_TRAINERS: '3' }), 3);
    assert.equal(trainerSlots({ TRACE_CPU_TRAINERS: 'many' }), 1, 'a bad value means one');
    assert.equal(trainerSlots({ TRACE_GPU_COUNT: '4' }), 4, 'TRACE_GPU_COUNT names the slots outright');
  },
);

test(
  'each torch process gets its share of the cores, unless OMP_NUM_THREADS is set or a GPU does the math',
  { skip: !cpuOnly && 'a GPU is visible' },
  () => {
    assert.deepEqual(torchThreadsEnv(1, {}), { OMP_NUM_THREADS: String(cores) });
    assert.deepEqual(torchThreadsEnv(2, {}), { OMP_NUM_THREADS: String(Math.max(1, Math.floor(cores / 2))) });
    assert.deepEqual(torchThreadsEnv(cores * 4, {}), { OMP_NUM_THREADS: '1' }, 'never below one thread');
    assert.deepEqual(torchThreadsEnv(2, { OMP_NUM_THREADS: '7' }), {});
    assert.deepEqual(torchThreadsEnv(2, { TRACE_GPU_COUNT: '1' }), {});
  },
);
