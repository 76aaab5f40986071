import { ApplicationFailure, isCancellation, proxyActivities } from '@temporalio/workflow';
import type { CpuActivities } from '../contracts.js';
import { longActivity, shortActivity } from '../options.js';
import { failureMessage } from '../pool.js';
import type { PipelineResult } from '../types.js';
import type { Rollouts } from './rollouts.js';
import type { Run } from './run.js';

export type Analysis = PipelineResult['analysis'];
export interface Identified {
  analysis: Analysis;
  /** The capabilities stage 1 kept, with the dictionary's descriptions. */
  selected: { name: string; description: string }[];
}

/**
 * Stage 1, capability identification: one discovery of the capability dictionary, R independent
 * labeling passes over the rollouts, K-of-R selection. An analysis that fails (e.g. an analyst that
 * cannot produce a valid dictionary) ends stage 1, not the run: evaluation and report still say
 * what happened.
 */
export async function identifyCapabilities(run: Run, rollouts: Rollouts): Promise<Identified> {
  const { runId, config, timeouts } = run;
  const rolloutRefs = rollouts.refs;
  const short = proxyActivities<CpuActivities>(shortActivity(timeouts));
  const long = proxyActivities<CpuActivities>(longActivity(config, 'analyst', timeouts));
  let identified: Identified;
  try {
    run.enter('stage1:discovery');
    const discovery = await long.discoverCapabilities({ runId, config, rolloutRefs });
    run.enter('stage1:labeling');
    const passes = await Promise.allSettled(
      Array.from({ length: config.analysis.passes }, (_, pass) =>
        run.labelingPass(() => long.labelPass({ runId, config, pass, dictionaryRef: discovery.ref, rolloutRefs })),
      ),
    );
    const labels = passes.flatMap((p) => (p.status === 'fulfilled' ? [p.value.ref] : []));
    if (labels.length === 0) {
      throw ApplicationFailure.nonRetryable(
        `every labeling pass failed: ${failureMessage((passes[0] as PromiseRejectedResult).reason)}`,
        'NoLabels',
      );
    }
    run.enter('stage1:selection');
    const selection = await short.selectCapabilities({
      runId,
      config,
      dictionaryRef: discovery.ref,
      rolloutRefs,
      passRefs: labels,
    });
    identified = {
      selected: selection.selected,
      analysis: {
        dictionary: discovery.ref,
        selection: selection.ref,
        labels,
        selected: selection.selected.map((c) => c.name),
        failedPasses: run.progress.labeling.passesFailed,
        failedLabels: passes.reduce((n, p) => n + (p.status === 'fulfilled' ? p.value.failedItems : 0), 0),
        summary: selection.summary,
      },
    };
  } catch (err) {
    if (isCancellation(err)) throw err;
    identified = {
      selected: [],
      analysis: {
        labels: [],
        selected: [],
        failedPasses: run.progress.labeling.passesFailed,
        failedLabels: 0,
        summary: `capability identification failed at ${run.progress.stage}: ${failureMessage(err)}`,
        error: failureMessage(err),
      },
    };
  }
  run.capabilitiesSelected(identified.analysis.selected);
  return identified;
}
