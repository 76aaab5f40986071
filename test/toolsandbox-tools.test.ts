import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SandboxContext } from '../envs/toolsandbox/context.js';
import { callTool, parseToolArguments } from '../envs/toolsandbox/tools.js';

/**
 * The ported tools against upstream's own outputs: 96 probe sequences of 8 calls (every starting
 * combination of the four switches; right, wrong-typed, missing and extra arguments), recorded by
 * running tool_sandbox.tools.setting / user_tools (test/fixtures/toolsandbox/README.md).
 */
interface Step {
  tool: string;
  args: Record<string, unknown>;
  content: string;
  exception: string | null;
  trace: unknown;
  setting: Record<string, boolean>;
  conversation_active: boolean;
}
const probes = JSON.parse(readFileSync(new URL('./fixtures/toolsandbox/settings-probes.json', import.meta.url), 'utf8')) as { initial: Record<string, boolean>; steps: Step[] }[];

test(`settings and end_conversation: outputs, errors, traces and state agree with upstream on ${probes.length * 8} calls`, () => {
  let errors = 0;
  for (const p of probes) {
    const ctx = SandboxContext.empty();
    ctx.updateDatabase('SETTING', ctx.getDatabase('SETTING').map((r) => ({ ...r, ...p.initial })));
    ctx.addToDatabase('SANDBOX', [{ sender: 'USER', recipient: 'AGENT', content: 'hi' }]);
    for (const [i, s] of p.steps.entries()) {
      const where = `${JSON.stringify(p.initial)} step ${i} ${s.tool}(${JSON.stringify(s.args)})`;
      ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: s.tool }]);
      const out = callTool(ctx, s.tool, s.args);
      ctx.addToDatabase('SANDBOX', [{ sender: 'EXECUTION_ENVIRONMENT', recipient: 'AGENT', content: out.content }]);
      assert.equal(out.content, s.content, where);
      assert.equal(out.exception, s.exception, where);
      assert.deepEqual(out.trace === null ? null : JSON.parse(out.trace), s.trace, where);
      const row = ctx.getDatabase('SETTING')[0];
      assert.deepEqual(Object.fromEntries(Object.keys(s.setting).map((k) => [k, row[k]])), s.setting, where);
      assert.equal(ctx.getDatabase('SANDBOX').at(-1)!.conversation_active, s.conversation_active, where);
      if (s.exception) errors++;
    }
  }
  // The probes exercise the dependency errors, not just the happy path.
  assert.ok(errors > 100, String(errors));
  assert.ok(probes.some((p) => p.steps.some((s) => s.exception?.startsWith('PermissionError'))));
});

interface UtilityProbe {
  tool: string;
  args_json: string;
  content: string;
  exception: string | null;
  trace: unknown;
}
const utilityProbes = JSON.parse(readFileSync(new URL('./fixtures/toolsandbox/utilities-probes.json', import.meta.url), 'utf8')) as UtilityProbe[];

test(`timestamp utilities: outputs, errors and traces agree with upstream on ${utilityProbes.length} calls`, () => {
  const bad: string[] = [];
  for (const p of utilityProbes) {
    const ctx = SandboxContext.empty();
    ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: p.tool }]);
    const { args, floats } = parseToolArguments(p.args_json);
    const out = callTool(ctx, p.tool, args, floats);
    const trace = out.trace === null ? null : JSON.parse(out.trace);
    if (out.content !== p.content || out.exception !== p.exception || JSON.stringify(trace) !== JSON.stringify(p.trace)) {
      bad.push(`${p.tool}(${p.args_json}): ours ${out.content} | upstream ${p.content}`);
    }
  }
  assert.deepEqual(bad, []);
  assert.ok(utilityProbes.filter((p) => p.exception).length > 100);
});
