import { parseConfig } from '../core/config.js';
import { actionMessage, type AgentAction, type Environment } from '../envs/environment.js';
import {
  isReferenceCapability,
  loadReferenceEnv,
  REFERENCE_ENVS,
  type ReferenceCapability,
} from '../envs/reference/index.js';
import { knownEnvironments, openEnvironment } from '../envs/registry.js';
import type { SyntheticEnvironment } from '../envs/sdk/index.js';
import { DESK_TASKS, SHOWCASE_DESK } from '../envs/showcase/desk.js';
import {
  createTau2Environment,
  getDomain,
  goldReplayLine,
  replayGoldAll,
  TAU2_DOMAINS,
  type TaskSet,
} from '../envs/tau2/index.js';
import { CliError } from './commands/common.js';
import type { EnvCommandIo } from './env.js';

/** What `trace env list | show | replay` do (cli/env.ts defines the commands and loads this on use). */

/** `tau2-airline` or `airline` → the domain name; other names get a one-line error. */
function tau2Domain(env: string) {
  const bare = env.replace(/^tau2-/, '');
  if (!(TAU2_DOMAINS as string[]).includes(bare)) {
    throw new CliError(
      `env: '${env}' is not a built-in target environment (known: ${[...TAU2_DOMAINS.map((d) => `tau2-${d}`), ...builtInEnvironments()].join(', ')}; reference envs: trace env list)`,
    );
  }
  return getDomain(bare).name;
}

function taskSetOption(v: string | undefined): TaskSet {
  if (v === undefined || v === 'current' || v === 'legacy') return v ?? 'current';
  throw new CliError(`--task-set: expected 'current' or 'legacy', got '${v}'`);
}

export async function listEnvironments(io: EnvCommandIo): Promise<void> {
  for (const d of TAU2_DOMAINS) {
    const e = createTau2Environment(d);
    const tasks = await e.listTasks();
    io.out(`tau2-${d}\t${tasks.length} tasks\t${e.tools().length} tools\t${e.info.description}\n`);
  }
  for (const name of builtInEnvironments()) {
    const e = await openBuiltIn(name);
    io.out(`${name}\t${(await e.listTasks()).length} tasks\t${e.tools().length} tools\t${e.info.description}\n`);
  }
  io.out('other names: http:<url> (see envs/registry.ts)\n');
  io.out('\nreference capability environments (seeded; open by capability or name):\n');
  for (const cap of Object.keys(REFERENCE_ENVS) as ReferenceCapability[]) {
    const e = await loadReferenceEnv(cap);
    io.out(
      `${cap}\t${e.metadata.name}\ttarget ${e.metadata.targetEnv}\t${e.tools().length} tools\t${e.metadata.description}\n`,
    );
  }
}

export async function showEnvironment(name: string, opts: { taskSet?: string }, io: EnvCommandIo): Promise<void> {
  const reference = await findReference(name);
  if (reference) return showReference(reference, io);
  // toolsandbox-<category|variant> is a prefix family the registry opens like a built-in name.
  if (builtInEnvironments().includes(name) || name.startsWith('toolsandbox-')) {
    let e: Environment;
    try {
      e = await openBuiltIn(name);
    } catch (err) {
      throw new CliError((err as Error).message);
    }
    return showBuiltIn(e, io);
  }
  const d = tau2Domain(name);
  const e = createTau2Environment(d, { taskSet: taskSetOption(opts.taskSet) });
  const tasks = await e.listTasks();
  const splits = new Map<string, number>();
  for (const t of tasks) splits.set(t.split ?? '-', (splits.get(t.split ?? '-') ?? 0) + 1);
  const kinds = new Map(getDomain(d).agent.tools.map((t) => [t.name, t.type.toUpperCase()]));
  io.out(`${e.info.name}: ${e.info.description}\n`);
  io.out(`tasks: ${tasks.length} (${[...splits].map(([s, n]) => `${s} ${n}`).join(', ')})\n`);
  io.out(`system prompt: ${e.systemPrompt().length} characters\n`);
  io.out('tools:\n');
  for (const t of e.tools()) io.out(`  ${(kinds.get(t.function.name) ?? '?').padEnd(8)}${t.function.name}\n`);
}

export async function replayGold(
  name: string,
  opts: { task?: string; taskSet?: string; seeds: string },
  io: EnvCommandIo,
): Promise<void> {
  const reference = await findReference(name);
  if (reference) {
    const n = Number(opts.seeds);
    if (!Number.isInteger(n) || n < 1) throw new CliError(`--seeds: expected a positive integer, got '${opts.seeds}'`);
    for (let seed = 0; seed < n; seed++)
      io.out(`${JSON.stringify(await replay(reference, { seed }, reference.inspect(seed).gold))}\n`);
    return;
  }
  if (name === 'toolsandbox' || name.startsWith('toolsandbox-')) {
    const { replayToolSandboxGold } = await import('../envs/toolsandbox/gold-replay.js');
    const rest = name === 'toolsandbox' ? undefined : name.slice('toolsandbox-'.length);
    const { scenarioVariants, scenarioCategories } = await import('../envs/toolsandbox/environment.js');
    if (rest !== undefined && scenarioVariants().includes(rest))
      throw new CliError(
        `env: gold trajectories exist for the base scenarios only; replay 'toolsandbox' or 'toolsandbox-<category>', not the variant '${rest}'`,
      );
    if (rest !== undefined && !scenarioCategories().includes(rest))
      throw new CliError(`env: unknown ToolSandbox category '${rest}' (known: ${scenarioCategories().join(', ')})`);
    const category = rest?.toUpperCase();
    let lines;
    try {
      lines = replayToolSandboxGold(opts.task);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
    for (const l of lines) if (!category || l.categories.includes(category)) io.out(`${JSON.stringify(l)}\n`);
    return;
  }
  if (name === SHOWCASE_DESK) {
    const tasks = DESK_TASKS.filter((t) => opts.task === undefined || t.id === opts.task);
    if (!tasks.length) throw new CliError(`--task: task '${opts.task}' not found in ${SHOWCASE_DESK}`);
    const env = await openBuiltIn(name);
    for (const t of tasks) io.out(`${JSON.stringify(await replay(env, { taskId: t.id }, t.gold))}\n`);
    return;
  }
  const d = tau2Domain(name);
  const taskSet = taskSetOption(opts.taskSet);
  // Checked here so that an unknown id is bad input (one line), not a failure inside the replay.
  if (
    opts.task !== undefined &&
    !(await createTau2Environment(d, { taskSet }).listTasks()).some((t) => t.id === opts.task)
  ) {
    throw new CliError(`--task: task '${opts.task}' not found in tau2-${d} (${taskSet} tasks)`);
  }
  for (const r of replayGoldAll(d, taskSet, opts.task)) io.out(`${goldReplayLine(r)}\n`);
}

/** Exact-name environments of the registry (the prefix families, `tau2-<…>` and URLs, are not listed). */
const builtInEnvironments = () => knownEnvironments().filter((n) => !n.includes('<'));

function openBuiltIn(name: string): Promise<Environment> {
  const config = parseConfig({ env: { name } });
  return openEnvironment(config.env, { config });
}

/** A reference env by capability (`lookup_then_act`) or by its metadata name (`desk-cancel-by-name`). */
async function findReference(name: string): Promise<SyntheticEnvironment | undefined> {
  if (isReferenceCapability(name)) return loadReferenceEnv(name);
  for (const cap of Object.keys(REFERENCE_ENVS) as ReferenceCapability[]) {
    const e = await loadReferenceEnv(cap);
    if (e.metadata.name === name) return e;
  }
  return undefined;
}

function toolLines(e: Environment, io: EnvCommandIo): void {
  io.out('tools:\n');
  for (const t of e.tools())
    io.out(`  ${t.function.name}(${Object.keys((t.function.parameters.properties ?? {}) as object).join(', ')})\n`);
}

async function showBuiltIn(e: Environment, io: EnvCommandIo): Promise<void> {
  const tasks = await e.listTasks();
  const splits = new Map<string, number>();
  for (const t of tasks) splits.set(t.split ?? '-', (splits.get(t.split ?? '-') ?? 0) + 1);
  io.out(`${e.info.name}: ${e.info.description}\n`);
  io.out(`tasks: ${tasks.length} (${[...splits].map(([s, n]) => `${s} ${n}`).join(', ')})\n`);
  io.out(`system prompt: ${e.systemPrompt().length} characters\n`);
  toolLines(e, io);
}

function showReference(e: SyntheticEnvironment, io: EnvCommandIo): void {
  const md = e.metadata;
  const example = JSON.parse(e.inspect(0).instance) as { userGoal: string };
  io.out(`${md.name}: ${md.description}\n`);
  io.out(`capability: ${md.capability}\ntarget: ${md.targetEnv}\n`);
  io.out(`tasks: seeded generator (reset by seed)\n`);
  io.out(`system prompt: ${e.systemPrompt().length} characters\n`);
  io.out(`seed 0: ${example.userGoal}\n`);
  io.out(`gold (seed 0): ${e.inspect(0).gold.length} actions\n`);
  toolLines(e, io);
}

/** Plays `actions` from a fresh episode and scores it: the tool outputs and the reward. */
async function replay(env: Environment, start: { taskId: string } | { seed: number }, actions: readonly AgentAction[]) {
  const ep = await env.reset(start);
  const messages = ep.initialMessages();
  const calls: { name: string; error: boolean; output: string }[] = [];
  let termination: 'agent_stop' | 'user_stop' | 'max_steps' = 'agent_stop';
  try {
    for (const a of actions) {
      messages.push(actionMessage(a));
      const r = await ep.step(a);
      messages.push(r.observation);
      if (a.type === 'tool_call')
        calls.push({ name: a.call.function.name, error: r.error, output: r.observation.content ?? '' });
      if (r.done) {
        termination = (r.termination ?? 'agent_stop') as typeof termination;
        break;
      }
    }
    const info = await ep.evaluate(messages, termination);
    return { task_id: ep.taskId, reward: info.reward, success: info.success, termination, calls };
  } finally {
    await ep.close();
  }
}
