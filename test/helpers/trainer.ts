import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { execa } from 'execa';
import type { Message } from '../../core/messages.js';
import type { AgentAction, Environment, Episode } from '../../envs/environment.js';
import { PROJECT_ROOT } from '../../infra/temporal.js';

/**
 * Shared pieces of the tests that run the real Python trainer on CPU: a tiny random model and
 * tokenizer, and a one-turn "say the requested word" environment for GRPO to learn on.
 */

/** A tiny randomly initialised model and tokenizer (python -m trace_trainer tiny) at `dir`. */
export async function buildTinyModel(dir: string, args: string[] = []): Promise<string> {
  await execa(path.join(PROJECT_ROOT, '.venv/bin/python'), ['-m', 'trace_trainer', 'tiny', '--out', dir, ...args], {
    cwd: PROJECT_ROOT,
    env: { PYTHONPATH: path.join(PROJECT_ROOT, 'trainer') },
  });
  return dir;
}

export interface SayWordOptions {
  /** Words that score 0.3 when said instead of the target (default none: the reward is binary). */
  partialCreditWords?: readonly string[];
  /** The word every seed asks for (default "red" on odd seeds, "blue" on even ones). */
  target?: string;
  /** A delay in every reset, to pace iterations (a test that must catch training mid-way). */
  resetDelayMs?: number;
}

/**
 * One turn: reward 1 for saying the requested word ("red" on odd seeds, "blue" on even ones), so
 * groups have reward variance to learn from. A tool call is answered with an error and the episode
 * goes on; a message ends it.
 */
export function sayWordEnv(opts: SayWordOptions = {}): Environment {
  let n = 0;
  return {
    info: {
      name: 'say-word',
      kind: 'synthetic',
      description: 'say the requested word',
      capability: 'instruction_following',
    },
    tools: () => [],
    systemPrompt: () => 'say',
    listTasks: async () => [],
    async reset(req) {
      if (opts.resetDelayMs) await delay(opts.resetDelayMs);
      const seed = 'seed' in req ? req.seed : 0;
      const target = opts.target ?? (seed % 2 ? 'red' : 'blue');
      const episode: Episode = {
        id: `e${++n}`,
        taskId: `seed-${seed}`,
        initialMessages: (): Message[] => [{ role: 'user', content: `say ${target}` }],
        step: async (action: AgentAction) =>
          action.type === 'message'
            ? {
                observation: { role: 'user', content: 'bye' },
                error: false,
                done: true,
                termination: 'agent_stop' as const,
              }
            : {
                observation: { role: 'tool', tool_call_id: action.call.id, content: 'no tools' },
                error: true,
                done: false,
              },
        async evaluate(messages) {
          const first = messages.find((m) => m.role === 'assistant');
          const word = (first?.content ?? '').trim().split(/\s+/)[0];
          const reward = word === target ? 1 : opts.partialCreditWords?.includes(word) ? 0.3 : 0;
          return { reward, components: { word: reward }, success: reward === 1 };
        },
        fork: async () => episode,
        close: async () => {},
      };
      return episode;
    },
  };
}
