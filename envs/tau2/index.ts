/** Public surface of the tau2-bench port. */
export {
  createTau2Environment,
  AGENT_INSTRUCTION,
  GREETING,
  TAU2_MAX_ERRORS,
  TAU2_MAX_STEPS,
  type Tau2EnvOptions,
} from './environment.js';
export { TAU2_DOMAINS, getDomain, toolSchemas, type Tau2DomainName } from './domains.js';
export { loadTasks, taskSplits, userScenarioText, type Tau2Task, type TaskSet } from './tasks.js';
export { replayGold, replayGoldAll, goldReplayLine, type GoldReplay } from './gold-replay.js';
export { evaluateTau2, COMPLETED_TERMINATIONS } from './evaluator.js';
export type { UserSimulatorLlm } from './user-simulator.js';
export type { JudgeLlm } from './nl-judge.js';
