/** Stage 2 activities registered on trace-cpu (see workers/activities.ts). */
export {
  createSynthesisActivities,
  synthesizeEnvironment,
  validateEnvironment,
  type SynthesisDeps,
  type SynthesizeInput,
  type SynthesizeResult,
  type SynthesisStatus,
  type ValidateResult,
} from './synthesize.js';
