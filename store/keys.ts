import { createHash } from 'node:crypto';
import { taskKey } from '../core/evaluation.js';

/**
 * Every artifact key of a run (`runs/<runId>/…`) and of a lineage, in one place: the activities
 * that write an artifact and those that read it (a retried attempt, the next stage, a later run)
 * name it through here, so a layout change is one edit.
 */
const pad = (n: number, w: number) => String(n).padStart(w, '0');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const run = (runId: string) => `runs/${runId}`;

/** A held-out task as a key part: its task id (made key-safe), or its seed. */
export interface TaskPart {
  taskId?: string;
  seed?: number;
}
const taskPart = (t: TaskPart) => (t.taskId !== undefined ? `task-${taskKey(t.taskId)}` : `seed-${t.seed}`);

export const runKeys = {
  // Rollouts: one JSONL per batch, and one part per finished episode while the batch runs.
  rolloutBatch: (runId: string, i: number) => `${run(runId)}/rollouts/batch-${pad(i, 4)}.jsonl`,
  rolloutBatchParts: (runId: string, i: number) => `${run(runId)}/rollouts/batch-${pad(i, 4)}.parts/`,
  rolloutBatchPart: (runId: string, i: number, item: number) =>
    `${run(runId)}/rollouts/batch-${pad(i, 4)}.parts/${pad(item, 4)}.json`,

  // Stage 1: the dictionary, the labeling passes (one part per labeled trajectory), the result.
  dictionary: (runId: string) => `${run(runId)}/capabilities/dictionary.json`,
  labelPass: (runId: string, pass: number) => `${run(runId)}/capabilities/labels/pass-${pad(pass, 2)}.json`,
  labelPassItems: (runId: string, pass: number) => `${run(runId)}/capabilities/labels/pass-${pad(pass, 2)}.items/`,
  stage1: (runId: string) => `${run(runId)}/capabilities/stage1.json`,

  // Stage 2: per capability, its prompt, attempts, verdicts and manifests by source hash, result.
  synthesis: (runId: string, cap: string) => `${run(runId)}/synthesis/${cap}`,
  synthesisPrompt: (runId: string, cap: string) => `${run(runId)}/synthesis/${cap}/prompt.json`,
  synthesisAttempt: (runId: string, cap: string, n: number, file: string) =>
    `${run(runId)}/synthesis/${cap}/attempt-${n}/${file}`,
  synthesisResult: (runId: string, cap: string) => `${run(runId)}/synthesis/${cap}/result.json`,
  synthesisReference: (runId: string, cap: string, reference: string) =>
    `${run(runId)}/synthesis/${cap}/reference/${reference}.ts`,
  verdict: (runId: string, cap: string, source: string) =>
    `${run(runId)}/synthesis/${cap}/verdicts/${sha(source)}.json`,
  verdictRollouts: (runId: string, cap: string, source: string) =>
    `${run(runId)}/synthesis/${cap}/verdicts/${sha(source)}.rollouts.jsonl`,
  manifest: (runId: string, cap: string, source: string) =>
    `${run(runId)}/synthesis/${cap}/manifests/${sha(source)}.json`,

  // Stages 3–4: the adapter of each capability, the gate.
  adapter: (runId: string, cap: string) => `${run(runId)}/adapters/${cap}`,
  gate: (runId: string) => `${run(runId)}/gate`,

  // Evaluation: one record per (variant, task, trial), its trajectory, the variant's summary.
  evaluationEpisodes: (runId: string, variant: string) => `${run(runId)}/evaluation/${variant}/episodes/`,
  evaluationEpisode: (runId: string, variant: string, task: TaskPart, trial: number) =>
    `${run(runId)}/evaluation/${variant}/episodes/${taskPart(task)}-t${trial}.json`,
  evaluationTrajectory: (runId: string, variant: string, task: TaskPart, trial: number) =>
    `${run(runId)}/evaluation/${variant}/trajectories/${taskPart(task)}-t${trial}.json`,
  evaluationSummary: (runId: string, variant: string) => `${run(runId)}/evaluation/${variant}/summary.json`,

  reportJson: (runId: string) => `${run(runId)}/report/report.json`,
  reportHtml: (runId: string) => `${run(runId)}/report/report.html`,
};

/** One lineage per config name: runs of the same schedule share it. */
export const lineageKey = (configName: string) => `lineage/${configName.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`;
