import type OpenAI from 'openai';
import { z } from 'zod';
import type { Message } from '../../core/messages.js';
import { pyRepr } from './python-format.js';

/** tau2's NL-assertion judge (evaluator_nl_assertions.py): same prompts, one call, JSON results. */
export interface JudgeLlm {
  client: OpenAI;
  model: string | (() => Promise<string>);
  temperature?: number;
}

const SYSTEM_PROMPT = [
  '',
  '        TASK',
  '        - You will be given a list of expected outcomes and a conversation that was collected during a test case run.',
  '        - The conversation is between an agent and a customer.',
  '        - Your job is to evaluate whether the agent satisfies each of the expected outcomes.',
  '        - Grade each expected outcome individually.',
  '',
  '        FORMAT',
  '        - Your response should be a JSON object with the following fields:',
  '        - `reasoning`: a short explanation for your classification',
  '        - `metExpectation`: `true` if the agent satisfies the expected outcomes, `false` otherwise',
  '        - `expectedOutcome`: repeat the expectation from the input that you are grading',
  '        ',
  '        Example response structure:',
  '        {',
  '            "results": [',
  '                {',
  '                    "expectedOutcome": "<one of the expected outcomes from the input>",',
  '                    "reasoning": "<reasoning trace>",',
  '                    "metExpectation": <false or true>,',
  '                }',
  '            ]',
  '        }',
  '        ',
].join('\n');

const JudgeResultSchema = z.object({
  results: z.array(z.object({ expectedOutcome: z.string(), reasoning: z.string(), metExpectation: z.boolean() })),
});
export type NlAssertionCheck = { nl_assertion: string; met: boolean; justification: string };

const RESPONSE_SCHEMA = {
  type: 'object',
  properties: {
    results: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          expectedOutcome: { type: 'string' },
          reasoning: { type: 'string' },
          metExpectation: { type: 'boolean' },
        },
        required: ['expectedOutcome', 'reasoning', 'metExpectation'],
        additionalProperties: false,
      },
    },
  },
  required: ['results'],
  additionalProperties: false,
};

/** The judge's system and user messages for a trajectory, exactly as tau2 words them. */
export function judgeMessages(
  trajectory: Message[],
  assertions: string[],
): { role: 'system' | 'user'; content: string }[] {
  const conversation = trajectory.map((m) => `${m.role}: ${m.content ?? 'None'}`).join('\n');
  const user = `\n        conversation:\n        ${conversation}\n        \n        expectedOutcomes:\n        ${pyRepr(assertions)}\n        `;
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: user },
  ];
}

export async function judgeNlAssertions(
  judge: JudgeLlm,
  trajectory: Message[],
  assertions: string[],
  signal?: AbortSignal,
): Promise<NlAssertionCheck[]> {
  const model = typeof judge.model === 'string' ? judge.model : await judge.model();
  const res = await judge.client.chat.completions.create(
    {
      model,
      temperature: judge.temperature ?? 0,
      messages: judgeMessages(trajectory, assertions),
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'nl_assertions_eval', schema: RESPONSE_SCHEMA, strict: true },
      },
    },
    signal ? { signal } : undefined,
  );
  const content = res.choices[0]?.message?.content ?? '';
  let parsed: z.infer<typeof JudgeResultSchema>;
  try {
    parsed = JudgeResultSchema.parse(JSON.parse(content));
  } catch (e) {
    throw new Error(
      `NL-assertion judge (${model}) returned invalid JSON results: ${(e as Error).message.slice(0, 200)}`,
    );
  }
  return parsed.results.map((r) => ({
    nl_assertion: r.expectedOutcome,
    met: r.metExpectation,
    justification: r.reasoning,
  }));
}
