import { proxyActivities } from '@temporalio/workflow';
import type * as training from '../../activities/training.js';
import { gpuActivity } from '../../workflows/options.js';
import type { TimeoutOverrides } from '../../workflows/types.js';

/**
 * Test-only workflow: stage 3 alone, trainAdapter on trace-gpu with the production activity
 * options (gpuActivity), so a test can kill the GPU worker without running synthesis first.
 * Bundled by the test's own in-process worker, never by workers/run.ts.
 */
export async function trainAdapterWorkflow(
  input: training.TrainAdapterInput & { timeouts: TimeoutOverrides },
): Promise<training.TrainAdapterResult> {
  const { timeouts, ...rest } = input;
  const gpu = proxyActivities<Pick<typeof training, 'trainAdapter'>>(gpuActivity(timeouts));
  return gpu.trainAdapter(rest);
}
