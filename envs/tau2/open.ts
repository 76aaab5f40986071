import type { Config } from '../../core/config.js';
import type { Environment } from '../environment.js';
import type { OpenDeps } from '../registry.js';
import { getDomain, TAU2_DOMAINS } from './domains.js';
import { createTau2Environment } from './environment.js';

/** Opens `tau2-airline|tau2-retail|tau2-mock` with the config's userSimulator and judge LLM roles, opened by `llm`. */
export function openTau2Env(name: string, config: Config, llm?: OpenDeps['llm']): Environment {
  const bare = name.replace(/^tau2-/, '');
  if (!(TAU2_DOMAINS as string[]).includes(bare))
    throw new Error(
      `env.name: unknown tau2 environment '${name}' (known: ${TAU2_DOMAINS.map((d) => `tau2-${d}`).join(', ')})`,
    );
  const domain = getDomain(bare).name;
  return createTau2Environment(domain, {
    taskSet: config.env.taskSet,
    ...(llm ? { userSimulator: llm('userSimulator'), judge: llm('judge') } : {}),
    maxSteps: config.rollouts.maxSteps,
    maxErrors: config.rollouts.maxErrors,
  });
}
