/** Workflow bundle entry: every workflow type the trace-cpu worker serves. */
export { tracePipeline } from './pipeline.js';
export { capabilityWorkflow } from './capability.js';
export { traceRetrain } from './retrain.js';
export { evaluationWorkflow } from './evaluation.js';
