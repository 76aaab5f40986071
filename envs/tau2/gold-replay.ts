import { pyJsonDumps } from './python-format.js';
import { getDomain, type Tau2DomainName } from './domains.js';
import { Tau2State } from './state.js';
import { loadTasks, type Tau2Task, type TaskSet } from './tasks.js';

/** Replays a task's gold actions on a fresh environment: the `trace env replay --gold` record. */
export interface GoldReplay {
  task_id: string;
  db_hash: string;
  calls: { name: string; error: boolean; output: string }[];
}

export function replayGold(domain: Tau2DomainName, task: Tau2Task): GoldReplay {
  const state = Tau2State.forTask(getDomain(domain), task);
  const calls = (task.evaluation_criteria?.actions ?? []).map((a) => {
    const out = state.call(a.requestor, a.name, a.arguments);
    return { name: a.name, error: out.error, output: out.content };
  });
  return { task_id: task.id, db_hash: state.db.hash(), calls };
}

/** Gold replays of every task (or one), in task-file order. */
export function replayGoldAll(domain: Tau2DomainName, taskSet: TaskSet = 'current', taskId?: string): GoldReplay[] {
  const tasks = loadTasks(domain, taskSet).filter((t) => taskId === undefined || t.id === taskId);
  if (taskId !== undefined && !tasks.length)
    throw new Error(`task '${taskId}' not found in tau2 ${domain} (${taskSet})`);
  return tasks.map((t) => replayGold(domain, t));
}

/** One JSONL line exactly as tau2-bench's json.dumps writes it (", " and ": " separators). */
export function goldReplayLine(r: GoldReplay): string {
  return pyJsonDumps(r);
}
