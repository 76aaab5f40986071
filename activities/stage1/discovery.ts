import type { ArtifactRef } from '../../core/artifact-ref.js';
import {
  CapabilityDictionarySchema,
  discoveryOutputSchema,
  type Capability,
  type CapabilityDictionary,
  type DiscoveryOutput,
} from '../../core/capability.js';
import { compactTrajectory, truncate } from '../../core/compaction.js';
import type { Config } from '../../core/config.js';
import { DISCOVERY_SYSTEM, discoveryUser } from '../../core/prompts/stage1.js';
import type { Trajectory } from '../../core/trajectory.js';
import { heartbeat } from '../../infra/activity-context.js';
import { InvalidLlmOutputError, parseJsonReply } from '../../llm/client.js';
import { runKeys } from '../../store/keys.js';
import { analysable, byId, loadTrajectories, type Stage1Deps } from './common.js';

/** Stage 1, discovery: one analyst call contrasting failures with successes proposes the capability dictionary. */

const MIN_DISCOVERY_ITEM_CHARS = 800;
const POLICY_EXCERPT_CHARS = 2000;

export function createDiscoveryActivities(deps: Stage1Deps) {
  async function discoverCapabilities(input: {
    config: Config;
    runId: string;
    rolloutRefs: ArtifactRef[];
  }): Promise<{ ref: ArtifactRef; capabilities: number }> {
    const { config, runId, rolloutRefs } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.dictionary(runId);
    const existing = await store.stat(key);
    if (existing) {
      const d = CapabilityDictionarySchema.parse(await store.getJson(existing));
      return { ref: existing, capabilities: d.capabilities.length };
    }
    const ts = (await loadTrajectories(store, rolloutRefs)).filter(analysable).sort(byId);
    const failures = ts.filter((t) => !t.success);
    const successes = ts.filter((t) => t.success);
    const llm = deps.createLlm(config, 'analyst');
    let dictionary: CapabilityDictionary;
    if (failures.length === 0) {
      // Nothing to contrast: an empty dictionary, and selection reports why.
      dictionary = { capabilities: [], basedOn: { successes: [], failures: [] }, model: await llm.model() };
    } else {
      const shown = pickForDiscovery(failures, successes, config.analysis.maxTrajectoryChars);
      const policy = truncate(ts[0]?.messages.find((m) => m.role === 'system')?.content ?? '', POLICY_EXCERPT_CHARS);
      heartbeat({ stage: 'discovery' });
      const tools = toolNamesOf(ts);
      const warnings: string[] = [];
      let out: DiscoveryOutput;
      try {
        out = await llm.structured(
          [
            { role: 'system', content: DISCOVERY_SYSTEM },
            {
              role: 'user',
              content: discoveryUser({
                maxCapabilities: config.analysis.maxCapabilities,
                policy,
                failures: shown.failures.map((t) => compactTrajectory(t, shown.budget)),
                successes: shown.successes.map((t) => compactTrajectory(t, shown.budget)),
              }),
            },
          ],
          discoveryOutputSchema(tools),
          'capability_dictionary',
        );
      } catch (e) {
        // Sentence counts are the one rule a grammar-constrained small model cannot be held to: after
        // the repairs, output that breaks only that rule is kept, with a warning in the report.
        if (!(e instanceof InvalidLlmOutputError)) throw e;
        const lenient = discoveryOutputSchema(tools, { sentences: false }).safeParse(parseJsonReply(e.lastContent));
        if (!lenient.success) throw e;
        out = lenient.data;
        warnings.push(`kept the analyst's dictionary although ${e.lastError}`);
      }
      dictionary = {
        capabilities: canonicalDictionary(out.capabilities, config.analysis.maxCapabilities),
        basedOn: { successes: shown.successes.map((t) => t.id), failures: shown.failures.map((t) => t.id) },
        model: await llm.model(),
        ...(warnings.length ? { warnings } : {}),
      };
    }
    const ref = await store.put(key, JSON.stringify(dictionary, null, 2));
    return { ref, capabilities: dictionary.capabilities.length };
  }

  return { discoverCapabilities };
}

function toolNamesOf(ts: readonly Trajectory[]): string[] {
  const names = new Set<string>();
  for (const t of ts)
    for (const m of t.messages)
      if (m.role === 'assistant') for (const c of m.tool_calls ?? []) names.add(c.function.name);
  return [...names];
}

/**
 * Which trajectories the discovery prompt shows: failures and successes interleaved two to one
 * (failures are what the dictionary must explain), each compacted to an equal share of the budget
 * (maxTrajectoryChars in all, so one discovery prompt fits the same context as one labeling prompt).
 */
export function pickForDiscovery(failures: Trajectory[], successes: Trajectory[], totalChars: number) {
  const order: Trajectory[] = [];
  let f = 0;
  let s = 0;
  while (f < failures.length || s < successes.length) {
    for (let k = 0; k < 2 && f < failures.length; k++) order.push(failures[f++]);
    if (s < successes.length) order.push(successes[s++]);
  }
  const n = Math.max(1, Math.min(order.length, Math.floor(totalChars / MIN_DISCOVERY_ITEM_CHARS)));
  const chosen = order.slice(0, n);
  return {
    failures: chosen.filter((t) => !t.success),
    successes: chosen.filter((t) => t.success),
    budget: Math.floor(totalChars / n),
  };
}

/** Dedupe by name (first wins, order = the analyst's ranking) and cap. */
export function canonicalDictionary(caps: readonly Capability[], max: number): Capability[] {
  const seen = new Set<string>();
  const out: Capability[] = [];
  for (const c of caps) {
    if (seen.has(c.name)) continue;
    seen.add(c.name);
    out.push({ name: c.name, description: c.description.trim() });
  }
  return out.slice(0, max);
}
