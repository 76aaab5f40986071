import type { Config } from '../../core/config.js';
import { createLlm } from '../../activities/llm.js';
import type { Environment } from '../environment.js';
import { getDomain, TAU2_DOMAINS } from './domains.js';
import { createTau2Environment } from './environment.js';

/** Opens `tau2-airline|tau2-retail|tau2-mock` with the config's userSimulator and judge LLM roles. */
export function openTau2Env(name: string, config: Config): Environment {
  const bare = name.replace(/^tau2-/, '');
  if (!(TAU2_DOMAINS as string[]).includes(bare)) throw new Error(`env.name: unknown tau2 environment '${name}' (known: ${TAU2_DOMAINS.map((d) => `tau2-${d}`).join(', ')})`);
  const domain = getDomain(bare).name;
  const user = createLlm(config, 'userSimulator');
  const judge = createLlm(config, 'judge');
  return createTau2Environment(domain, {
    taskSet: config.env.taskSet,
    userSimulator: { client: user.client, model: () => user.model(), temperature: user.temperature },
    judge: { client: judge.client, model: () => judge.model(), temperature: judge.temperature },
    maxSteps: config.rollouts.maxSteps,
    maxErrors: config.rollouts.maxErrors,
  });
}
