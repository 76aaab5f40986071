import { runWorkersMain } from './run.js';

/** Task queue trace-gpu: trainAdapter and fitGate, one activity per GPU. */
await runWorkersMain(['gpu']);
