import type OpenAI from 'openai';
import type { Config } from '../core/config.js';
import type { Environment } from './environment.js';

/**
 * Environment names → openers. Add one line per environment (exact names) or per prefix
 * (`http:` and friends); imports are lazy so an env's dependencies load only when it is used.
 */
type Opener = (name: string, deps: OpenDeps) => Promise<Environment>;

/** An LLM endpoint an env talks to itself (τ²'s user simulator and judge). */
export interface EnvLlm {
  client: OpenAI;
  model: string | (() => Promise<string>);
  temperature?: number;
}

export interface OpenDeps {
  config: Config;
  /**
   * Opens one of the config's LLM roles for the env; the caller owns the LLM client (envs know no
   * activities). Without it a τ² env opens without user simulator and judge: tasks and gold
   * replays work, an agent's message fails with a one-line error.
   */
  llm?: (role: 'userSimulator' | 'judge') => EnvLlm;
}

const byName: Record<string, Opener> = {
  'toy-orders': async () => (await import('./toy/orders.js')).createToyOrdersEnv(),
  'showcase-desk': async () => (await import('./showcase/desk.js')).createShowcaseDeskEnv(),
  toolsandbox: async (_name, deps) =>
    (await import('./toolsandbox/environment.js')).createToolSandboxEnvironment(toolSandboxOptions(deps)),
};

/** ToolSandbox's user simulator is the config's userSimulator role (upstream's prompt and few-shot dialogue come with the scenario). */
const toolSandboxOptions = (deps: OpenDeps) => (deps.llm ? { userSimulator: deps.llm('userSimulator') } : {});

const byPrefix: Record<string, Opener> = {
  'tau2-': async (name, deps) => (await import('./tau2/open.js')).openTau2Env(name, deps.config, deps.llm),
  // `toolsandbox-<category>`: the base scenarios of one category (single_tool_call, canonicalization, …).
  // `toolsandbox-<variant>` (3_distraction_tools, …_tool_name_scrambled) or `toolsandbox-<category>`.
  'toolsandbox-': async (name, deps) => {
    const m = await import('./toolsandbox/environment.js');
    const rest = name.slice('toolsandbox-'.length);
    return m.createToolSandboxEnvironment({
      ...(m.scenarioVariants().includes(rest) ? { variant: rest } : { category: rest }),
      ...toolSandboxOptions(deps),
    });
  },
  // `http:<url>` or a bare `http(s)://…` URL: any env speaking envs/protocol/README.md.
  'http:': async (name) =>
    (await import('./protocol/client.js')).HttpEnvironment.connect(name.replace(/^http:(?=https?:\/\/)/, '')),
  'https:': async (name) => (await import('./protocol/client.js')).HttpEnvironment.connect(name),
};

export function knownEnvironments(): string[] {
  return [...Object.keys(byName), ...Object.keys(byPrefix).map((p) => `${p}<…>`)];
}

export async function openEnvironment(envConfig: Config['env'], deps: OpenDeps): Promise<Environment> {
  const name = envConfig.name;
  const exact = byName[name];
  if (exact) return exact(name, deps);
  const prefix = Object.keys(byPrefix).find((p) => name.startsWith(p));
  if (prefix) return byPrefix[prefix](name, deps);
  throw new Error(`env.name: unknown environment '${name}'; known: ${knownEnvironments().join(', ')}`);
}
