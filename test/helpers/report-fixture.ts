import type { EvalEpisode, VariantSpec } from '../../core/evaluation.js';
import { summarizeEvaluation } from '../../core/evaluation.js';
import type { ReportInputs } from '../../core/report.js';

/** Episodes for a variant from a per-task success pattern, e.g. '1100101' over tasks t0..t6. */
export function episodesFrom(variant: string, domain: string, pattern: string, trial = 0): EvalEpisode[] {
  return [...pattern].map((ch, i) => ({
    variant,
    domain,
    taskId: `t${i}`,
    trial,
    success: ch === '1',
    reward: ch === '1' ? 1 : 0,
    termination: 'agent_stop',
    steps: 3,
    usage: { calls: 2, promptTokens: 100, completionTokens: 20 },
    durationMs: 10,
    model: 'm',
    temperature: 0,
  }));
}

export function summaryOf(spec: VariantSpec, episodes: EvalEpisode[], trials = 1) {
  return summarizeEvaluation(spec, 'test', trials, trials > 1 ? 1 : 0, episodes);
}

/** A full report input with every section filled, as a finished run would produce. */
export function fullReportInputs(): ReportInputs {
  const base = summaryOf({ name: 'base', kind: 'base' }, [
    ...episodesFrom('base', 'airline', '1100100000'),
    ...episodesFrom('base', 'retail', '10100'),
  ]);
  const trace = summaryOf({ name: 'trace', kind: 'trace', model: 'moe' }, [
    ...episodesFrom('trace', 'airline', '1110110100'),
    ...episodesFrom('trace', 'retail', '11100'),
  ]);
  const prompt = summaryOf({ name: 'prompt_only', kind: 'prompt_only' }, [
    ...episodesFrom('prompt_only', 'airline', '1100100100'),
    ...episodesFrom('prompt_only', 'retail', '10100'),
  ]);
  return {
    runId: 'run-1',
    name: 'demo <run>',
    env: 'tau2-airline',
    generatedAt: '2026-11-29T21:00:00Z',
    notes: ['tiny model: numbers are a smoke signal'],
    evaluations: [base, trace, { ...prompt, summaryUri: 'file:///tmp/prompt.json' }],
    analysis: {
      trajectories: 40,
      successes: 12,
      passes: 10,
      minPassesSelected: 8,
      deltaThreshold: 0.2,
      coverageThreshold: 0.1,
    },
    capabilities: [
      {
        name: 'structured_data_reasoning',
        description: 'Reads DB records & reasons over them.',
        meanDelta: 0.41,
        stdDelta: 0.05,
        meanCoverage: 0.33,
        stdCoverage: 0.04,
        passesSelected: 10,
        passes: 10,
        selected: true,
        synthesis: { status: 'ok', attempts: 2 },
        training: { status: 'ok', curve: [0, 1, 2, 3].map((i) => ({ iteration: i, meanReward: 0.2 + 0.1 * i })) },
      },
      {
        name: 'permission_error_recovery',
        description: 'Recovers from permission errors.',
        meanDelta: 0.25,
        stdDelta: 0.08,
        meanCoverage: 0.12,
        stdCoverage: 0.03,
        passesSelected: 8,
        passes: 10,
        selected: true,
        synthesis: { status: 'failed', attempts: 3, message: 'gold solution scored 0.4' },
        training: { status: 'skipped' },
      },
      {
        name: 'datetime_reasoning',
        description: 'Computes dates.',
        meanDelta: 0.05,
        stdDelta: 0.02,
        meanCoverage: 0.02,
        stdCoverage: 0.01,
        passesSelected: 1,
        passes: 10,
        selected: false,
      },
    ],
    gate: { routing: [{ capability: 'structured_data_reasoning', share: 1 }] },
    cost: {
      llm: [{ role: 'analyst', calls: 410, promptTokens: 900000, completionTokens: 40000 }],
      rollouts: 40,
      evaluationEpisodes: 45,
      cpuSeconds: 300,
    },
    links: {
      ui: 'http://127.0.0.1:8233',
      run: 'http://127.0.0.1:8233/namespaces/default/workflows/run-1',
      children: [
        {
          label: 'capability structured_data_reasoning',
          url: 'http://127.0.0.1:8233/namespaces/default/workflows/run-1-cap-0',
        },
      ],
    },
  };
}
