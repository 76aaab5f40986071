/**
 * tau2-bench's pass^k: for each task with n trials of which c succeeded, C(c, k) / C(n, k) (the
 * chance that k trials drawn without replacement all succeed), averaged over tasks. Pure.
 */
export function binomial(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  const m = Math.min(k, n - k);
  let r = 1;
  for (let i = 1; i <= m; i++) r = (r * (n - m + i)) / i;
  return r;
}

/** pass^k over tasks given each task's trial successes; tasks with fewer than k trials are rejected. */
export function passHatK(
  successesByTask: ReadonlyMap<string, readonly boolean[]> | Record<string, readonly boolean[]>,
  k: number,
): number {
  if (!Number.isInteger(k) || k < 1) throw new Error(`k: must be a positive integer, got ${k}`);
  const entries = successesByTask instanceof Map ? [...successesByTask.entries()] : Object.entries(successesByTask);
  if (!entries.length) throw new Error('passHatK: no tasks');
  let sum = 0;
  for (const [task, trials] of entries) {
    if (trials.length < k) throw new Error(`passHatK: task ${task} has ${trials.length} trials, fewer than k=${k}`);
    const c = trials.filter(Boolean).length;
    sum += binomial(c, k) / binomial(trials.length, k);
  }
  return sum / entries.length;
}
