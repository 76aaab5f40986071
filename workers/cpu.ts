import { runWorkersMain } from './run.js';

/** Task queue trace-cpu: every workflow and the CPU activities. */
await runWorkersMain(['cpu']);
