/**
 * The environment SDK (`#env-sdk`): what synthesized and reference capability environments are
 * written against. See envs/sdk/README.md (it is also part of the generator prompt).
 */
export { Rng } from './rng.js';
export { gen, addDays, utcFields, AIRPORTS, type Person } from './data.js';
export { canonicalJson, stableHash, cloneState, type Json } from './state.js';
export { schemaViolation, type JsonSchema } from './schema.js';
export {
  defineTool,
  toolsFromSchemas,
  toToolSchema,
  runToolCall,
  ToolError,
  type ToolDef,
  type ToolContext,
} from './tools.js';
export { scriptedUser, llmUser, STOP, type UserSimulator, type UserContext } from './user.js';
export {
  toolCallsOf,
  statesMatch,
  agentText,
  communicated,
  calledWith,
  weighted,
  dbThenCommunication,
  type Score,
  type CallRecord,
} from './verify.js';
export {
  defineEnvironment,
  inspectInstance,
  call,
  say,
  INSPECT_PREFIX,
  type EnvMetadata,
  type Instance,
  type EvaluateContext,
  type EnvironmentDefinition,
  type InstanceView,
  type SyntheticEnvironment,
} from './define.js';
export type { AgentAction, Environment, Episode, StepResult } from '../environment.js';
export type { Message, ToolSchema } from '../../core/messages.js';
export type { RewardInfo, Termination } from '../../core/trajectory.js';
export {
  airlineTools,
  airlineUser,
  evaluateArithmetic,
  AIRLINE_POLICY,
  AIRLINE_TOOL_SCHEMAS,
  type AirlineDb,
  type AirlineUser,
  type Reservation,
  type Passenger,
  type PaymentMethod,
  type FlightSegment,
  type Cabin,
} from './airline.js';
export { deskTools, deskHotel, DESK_POLICY, DESK_CODE_ALPHABET, type DeskDb } from './desk.js';
