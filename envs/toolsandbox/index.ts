/** Public surface of the ToolSandbox port (work in progress: see envs/toolsandbox/README.md). */
export { SandboxContext, NAMESPACES, SCHEMAS, type Namespace, type Row } from './context.js';
export {
  evaluateContext,
  summarise,
  MilestoneMatcher,
  type EvaluationResult,
  type EvaluationSpec,
  type Milestone,
  type SimilaritySummary,
} from './evaluator.js';
export { loadScenarios, loadPack, BASE_VARIANT, type ToolSandboxScenario } from './scenarios.js';
export { callTool, PORTED_TOOLS, type ToolOutcome } from './tools.js';
