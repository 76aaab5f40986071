import { proxyActivities } from '@temporalio/workflow';
import { shortActivity } from '../workflows/options.js';
import { settlePool } from '../workflows/pool.js';

/** Bench-only workflow: N trivial activities through the pipeline's proxy options and fan-out pool. */
interface TrivialActivities {
  trivial(i: number): Promise<number>;
}
const { trivial } = proxyActivities<TrivialActivities>(shortActivity());

export async function trivialFanOut(n: number, concurrency: number): Promise<number> {
  const settled = await settlePool(
    Array.from({ length: n }, (_, i) => i),
    concurrency,
    (i) => trivial(i),
  );
  return settled.filter((s) => s.status === 'fulfilled').length;
}
