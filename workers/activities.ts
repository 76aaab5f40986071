import { createEvaluationActivities } from '../activities/evaluation.js';
import { createReportActivities } from '../activities/report.js';
import { createRetrainActivities } from '../activities/retrain.js';
import { createStage1Activities } from '../activities/stage1.js';
import { createSynthesisActivities } from '../activities/synthesis/index.js';
import { createTrainingActivities } from '../activities/training.js';

/**
 * The activities each task queue's workers register: the one place activity names are listed.
 * workflows/contracts.ts takes its types from these functions, so a workflow can call only what a
 * worker registers, and a module's helper exports never become activities.
 */
export type Queue = 'cpu' | 'gpu';

/** trace-cpu: rollouts and stage 1, stage 2 (synthesis), the evaluation fan-out, reports, retraining. */
export function createCpuActivities() {
  const stage1 = createStage1Activities();
  const evaluation = createEvaluationActivities();
  const report = createReportActivities();
  const retrain = createRetrainActivities();
  const synthesis = createSynthesisActivities();
  return {
    listRolloutTasks: stage1.listRolloutTasks,
    collectRolloutBatch: stage1.collectRolloutBatch,
    discoverCapabilities: stage1.discoverCapabilities,
    labelPass: stage1.labelPass,
    selectCapabilities: stage1.selectCapabilities,
    synthesizeEnvironment: synthesis.synthesizeEnvironment,
    validateEnvironment: synthesis.validateEnvironment,
    planEvaluation: evaluation.planEvaluation,
    evaluateVariant: evaluation.evaluateVariant,
    writeReport: report.writeReport,
    buildReport: report.buildReport,
    loadLineage: retrain.loadLineage,
    seedRetrainRun: retrain.seedRetrainRun,
    recordRetrainOutcome: retrain.recordRetrainOutcome,
  };
}

/** trace-gpu: stage 3 (GRPO per capability), stage 4 (the MoE gate), and serving trained agents for evaluation. */
export function createGpuActivities() {
  const evaluation = createEvaluationActivities();
  const training = createTrainingActivities();
  return {
    trainAdapter: training.trainAdapter,
    fitGate: training.fitGate,
    // Trained agents that no endpoint serves (gate, single adapters) are served on the machine with the accelerator.
    evaluateServed: evaluation.evaluateRun,
  };
}
