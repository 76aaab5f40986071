import { runWorkersMain } from './run.js';

/** The embedded default: the trace-cpu and trace-gpu workers in one process. */
await runWorkersMain(['cpu', 'gpu']);
