import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SynthesisConfigSchema } from '../core/synthesis.js';
import {
  REFERENCE_ENVS,
  loadReferenceEnv,
  referenceSource,
  type ReferenceCapability,
} from '../envs/reference/index.js';
import { call, say, type AgentAction, type SyntheticEnvironment } from '../envs/sdk/index.js';
import { parseConfig } from '../core/config.js';
import { anchorMiss, goldAnchorOf } from '../envs/gold-anchor.js';
import { createLlm } from '../llm/client.js';
import { episodeNumbers, startScriptedLlm, type ChatRequest, type ScriptedReply } from './helpers/scripted-llm.js';
import {
  checkCalibration,
  checkCompile,
  checkDeterminism,
  checkNonTriviality,
  batchShapeOf,
  checkSolvability,
  goldPolicy,
  playPolicy,
} from '../activities/synthesis/validate.js';

// The real check counts (100 / 50 / 30 seeds): in-process they take about a second per environment.
const config = SynthesisConfigSchema.parse({});
const caps = Object.keys(REFERENCE_ENVS) as ReferenceCapability[];

for (const cap of caps) {
  test(`reference ${cap}: passes checks 2–4 with the spec's seed counts`, async () => {
    const env = await loadReferenceEnv(cap);
    assert.equal(env.metadata.capability, cap);
    const checks = [
      await checkDeterminism(env, config),
      await checkSolvability(env, config),
      await checkNonTriviality(env, config, batchShapeOf(parseConfig({ env: { name: 'toy-orders' } }))),
    ];
    for (const r of checks) assert.equal(r.passed, true, `${r.check}: ${r.reason} ${r.examples.join(' | ')}`);
    assert.equal(checks[1].metrics.failingSeeds, 0, 'the gold solver scores 1.0 on every seed');
    assert.equal(checks[1].metrics.meanGoldReward, 1);
    // Gold played is what training's gold anchor holds an episode to: it never caps gold itself.
    for (let seed = 0; seed < 30; seed++) {
      const view = env.inspect(seed);
      const played = await playPolicy(env, seed, goldPolicy(view.gold));
      const miss = anchorMiss(goldAnchorOf(view)!, played.messages, 'after_last_call');
      const spoke = view.gold.some((a) => a.type === 'message');
      assert.ok(!miss || (!spoke && miss.what.startsWith('speaks less')), `seed ${seed}: ${miss?.what}`);
    }
  });
}

test('reference permission_error_recovery: check 1 through the sandbox (bundle, load, manifest)', async () => {
  const env = await loadReferenceEnv('permission_error_recovery');
  const manifest = { ...env.metadata, tools: env.tools().map((t) => t.function.name) };
  const { result, loaded } = await checkCompile(await referenceSource('permission_error_recovery'), manifest, {
    runner: 'sandbox',
    typecheck: false,
  });
  assert.equal(result.passed, true, result.reason);
  try {
    assert.equal(
      (await checkDeterminism(loaded!.env, SynthesisConfigSchema.parse({ seeds: { determinism: 20 } }))).passed,
      true,
    );
  } finally {
    await loaded!.close();
  }
});

test('reference showcase-desk envs: check 1 through the sandbox with the SDK type-check', async () => {
  for (const cap of ['exact_id_copying', 'lookup_then_act'] as const) {
    const env = await loadReferenceEnv(cap);
    const manifest = { ...env.metadata, tools: env.tools().map((t) => t.function.name) };
    const { result, loaded } = await checkCompile(await referenceSource(cap), manifest, {
      runner: 'sandbox',
      typecheck: true,
    });
    assert.equal(result.passed, true, `${cap}: ${result.reason}`);
    await loaded!.close();
  }
});

/** Gold with some actions replaced: documented failure modes must score low. */
async function variant(
  env: SyntheticEnvironment,
  seed: number,
  edit: (gold: AgentAction[], instance: any) => AgentAction[],
) {
  const view = env.inspect(seed);
  return (await playPolicy(env, seed, goldPolicy(edit(view.gold, JSON.parse(view.instance))))).reward;
}
const withoutFinalMessage = (g: AgentAction[]) => g.filter((a, i) => !(i === g.length - 1 && a.type === 'message'));
const toolName = (a: AgentAction) => (a.type === 'tool_call' ? a.call.function.name : 'message');

test('documented failure modes score low', async () => {
  const sdr = await loadReferenceEnv('structured_data_reasoning');
  assert.equal(await variant(sdr, 1, withoutFinalMessage), 0.3, 'DB right, total not told → 0.3');
  assert.equal(
    await variant(sdr, 1, (g, inst) => {
      const other = Object.keys(inst.initialState.reservations).find(
        (id) => id !== inst.expect.cancel && inst.initialState.reservations[id].status !== 'cancelled',
      )!;
      return g.map((a) =>
        toolName(a) === 'cancel_reservation' ? call('cancel_reservation', { reservation_id: other }) : a,
      );
    }),
    0,
    'wrong reservation cancelled → 0',
  );

  const tcp = await loadReferenceEnv('tool_calling_precision');
  for (const seed of [1, 2, 3, 4]) {
    const r = await variant(tcp, seed, (g, inst) =>
      g.map((a) => {
        if (a.type !== 'tool_call' || !a.call.function.name.startsWith('update_')) return a;
        const args = JSON.parse(a.call.function.arguments);
        if (args.passengers)
          args.passengers = args.passengers
            .slice(0, 1)
            .concat(args.passengers.slice(1).reverse())
            .map((p: any) => ({ ...p, dob: p.dob.replace(/^(\d+)-(\d+)-(\d+)$/, '$2/$3/$1') }));
        else
          args.payment_id = Object.keys(
            inst.initialState.users[inst.initialState.reservations[args.reservation_id].user_id].payment_methods,
          ).find((id) => id.startsWith('credit_card_'));
        return call(a.call.function.name, args);
      }),
    );
    assert.equal(r, 0, `seed ${seed}: reordered passengers / US-format dates / wrong payment id → 0`);
  }

  const msc = await loadReferenceEnv('multi_step_task_completion');
  const firstOnly = await variant(msc, 3, (g) =>
    g.slice(0, g.findIndex((a) => a.type === 'message') + 1).concat(say('###STOP###')),
  );
  assert.ok(firstOnly > 0 && firstOnly < 0.6, `stopping after the first request scores ${firstOnly}`);

  const pv = await loadReferenceEnv('precondition_verification');
  let deniedChecked = 0;
  for (let seed = 0; seed < 12; seed++) {
    const inst = JSON.parse(pv.inspect(seed).instance);
    const id = inst.expect.reservation_id;
    const blind = await variant(pv, seed, () => [
      call('cancel_reservation', { reservation_id: id }),
      say('Cancelled.'),
    ]);
    assert.equal(blind, 0, `seed ${seed}: cancelling without checking → 0`);
    if (!inst.expect.allowed) {
      deniedChecked++;
      assert.equal(
        await variant(pv, seed, () => [
          call('get_reservation_details', { reservation_id: id }),
          call('cancel_reservation', { reservation_id: id }),
          say('Cancelled.'),
        ]),
        0,
      );
    }
  }
  assert.ok(deniedChecked > 0, 'some seeds forbid cancelling');

  const per = await loadReferenceEnv('permission_error_recovery');
  assert.equal(
    await variant(per, 2, (g) => g.filter((a) => !toolName(a).startsWith('set_'))),
    0,
    'retrying without fixing settings → 0',
  );
  assert.equal(await variant(per, 2, withoutFinalMessage), 0.6, 'not telling the user → 0.6');

  const dt = await loadReferenceEnv('datetime_reasoning');
  assert.equal(
    await variant(dt, 4, (g) =>
      g.map((a) => {
        if (toolName(a) !== 'add_reminder' || a.type !== 'tool_call') return a;
        const args = JSON.parse(a.call.function.arguments);
        return call('add_reminder', { ...args, reminder_timestamp: args.reminder_timestamp + 7 * 86400 });
      }),
    ),
    0,
    'off by a week → 0',
  );
});

test("showcase-desk capability envs keep the target's tools and prompt; their failure modes score low", async () => {
  const { createShowcaseDeskEnv } = await import('../envs/showcase/desk.js');
  const target = createShowcaseDeskEnv();
  for (const cap of ['exact_id_copying', 'lookup_then_act'] as const) {
    const env = await loadReferenceEnv(cap);
    assert.equal(env.metadata.targetEnv, target.info.name);
    assert.deepEqual(env.tools(), target.tools(), `${cap}: same tool names, descriptions and schemas`);
    assert.equal(env.systemPrompt(), target.systemPrompt());
  }
  const eic = await loadReferenceEnv('exact_id_copying');
  const code = (inst: any) => inst.expect.code as string;
  for (const seed of [1, 2, 3]) {
    const near = await variant(eic, seed, (_g, inst) => [
      call('cancel_booking', { booking_code: code(inst).slice(1) }),
      say('Cancelled.'),
      say('Done.'),
    ]);
    assert.equal(near, 0.3, `seed ${seed}: a code with a character dropped → 0.3`);
    assert.equal(
      await variant(eic, seed, () => [
        call('cancel_booking', { booking_code: '1234567890' }),
        say('Cancelled.'),
        say('Done.'),
      ]),
      0,
      'a placeholder code → 0',
    );
    assert.equal(
      await variant(eic, seed, (_g, inst) => [
        call('find_booking', { guest: code(inst) }),
        say('Not found.'),
        say('Sorry.'),
      ]),
      0,
      'the code looked up as a name → 0',
    );
    assert.equal(
      await variant(eic, seed, (g) => [call('cancel_booking', { booking_code: '12345' }), ...g]),
      1,
      'a placeholder corrected after the error still succeeds',
    );
  }
  const lta = await loadReferenceEnv('lookup_then_act');
  for (const seed of [1, 2, 3]) {
    const inst = JSON.parse(lta.inspect(seed).instance);
    const ep = await lta.reset({ seed });
    // Opened after the lookup: the call and the tool's real result, before the agent's first action.
    const first = ep.initialMessages();
    assert.deepEqual(
      first.map((m) => m.role),
      ['user', 'assistant', 'tool'],
    );
    assert.equal(first[1].role === 'assistant' && first[1].tool_calls?.[0].function.name, 'find_booking');
    assert.deepEqual(JSON.parse(String(first[2].content)), {
      guest: inst.expect.guest,
      booking_code: inst.expect.code,
    });
    await ep.close();
    assert.equal(
      await variant(lta, seed, () => [
        call('cancel_booking', { booking_code: '1234567890' }),
        say('Cancelled.'),
        say('Done.'),
      ]),
      0,
      'an invented code → 0',
    );
    assert.equal(
      await variant(lta, seed, () => [
        call('find_booking', { guest: inst.expect.guest }),
        say('Found it.'),
        say('Bye.'),
      ]),
      0,
      'the lookup repeated, no cancellation → 0',
    );
    assert.equal(
      await variant(lta, seed, () => [
        call('find_booking', { guest: 'Nobody Here' }),
        call('cancel_booking', {
          booking_code: Object.keys(inst.initialState.bookings).find((c) => c !== inst.expect.code)!,
        }),
      ]),
      0,
      "another guest's booking cancelled → 0",
    );
  }
});

/**
 * A base policy for permission_error_recovery over the scripted OpenAI server: it reads each
 * PermissionError and fixes the blocking setting on even-numbered episodes, and gives up at the
 * first error on odd ones (numbered by `episodeNumbers`: calibration plays them in lockstep).
 */
function settingsPolicy(): (req: ChatRequest) => ScriptedReply {
  const episodes = episodeNumbers();
  return (req) => {
    const msgs = req.messages;
    const episode = episodes.of(req);
    const id = episodes.callId(episode, req);
    const goal = /^Text (\w+): "(.*)"$/.exec(String(msgs[1].content));
    const last = String(msgs.at(-1)!.content ?? '');
    const contacts = msgs.find((m) => m.role === 'tool' && String(m.content).startsWith('['));
    const send = () => {
      const to = (JSON.parse(String(contacts!.content)) as { phone_number: string }[])[0];
      return {
        toolCalls: [
          {
            name: 'send_message_with_phone_number',
            arguments: JSON.stringify({ phone_number: to.phone_number, content: goal![2] }),
            id,
          },
        ],
      };
    };
    const set = (name: string, on: boolean) => ({ toolCalls: [{ name, arguments: JSON.stringify({ on }), id }] });
    if (msgs.at(-1)!.role === 'user')
      return { toolCalls: [{ name: 'search_contacts', arguments: JSON.stringify({ name: goal![1] }), id }] };
    if (last.startsWith('[')) return send();
    if (last.includes('PermissionError') && episode % 2 === 1)
      return { content: 'Sorry, I could not send it: permission denied.' };
    if (last.includes('Cellular service is not enabled')) return set('set_cellular_service_status', true);
    if (last.includes('while low battery mode is on')) return set('set_low_battery_mode_status', false);
    if (last.includes('Low battery mode is now off')) return set('set_cellular_service_status', true);
    if (last.includes('Cellular service is now on')) return send();
    if (last === 'Message sent.')
      return {
        content: 'Your message was sent. I turned off low battery mode where needed and turned on cellular service.',
      };
    return { content: 'Something went wrong.' };
  };
}

test('reference permission_error_recovery: check 6 (calibration) against the scripted policy server', async () => {
  const policy = settingsPolicy();
  const llm = await startScriptedLlm((req) => policy(req));
  try {
    const config = parseConfig({
      env: { name: 'toy-orders' },
      llm: { policy: { baseURL: llm.baseURL, model: 'scripted-model' } },
      synthesis: { calibration: { groups: 4, rolloutsPerGroup: 4, concurrency: 1 } },
    });
    const { result, rollouts } = await checkCalibration(
      await loadReferenceEnv('permission_error_recovery'),
      config,
      createLlm(config, 'policy'),
    );
    assert.equal(result.passed, true, result.reason);
    assert.deepEqual(result.metrics, { meanReward: 0.5, successRate: 0.5, informativeShare: 1 });
    assert.ok(
      rollouts.some((t) => t.messages.some((m) => m.role === 'tool' && m.content.startsWith('Error: PermissionError'))),
    );
  } finally {
    await llm.close();
  }
});
