import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveEnvironment } from '../envs/protocol/server.js';
import { EnvProtocolError, HttpEnvironment } from '../envs/protocol/client.js';
import { formatConformance, runConformance } from '../envs/protocol/conformance.js';
import type { Environment } from '../envs/environment.js';
import { createCounterEnv } from './fixtures/counter-env.js';

const incrementBy2 = { name: 'increment', arguments: '{"by":2}' };

function assertAllPass(checks: Awaited<ReturnType<typeof runConformance>>) {
  assert.ok(checks.length >= 11, `expected the full suite, got ${checks.length} checks`);
  assert.ok(
    checks.every((c) => c.ok),
    formatConformance(checks),
  );
}

test('conformance: in-process fixture env passes every check', async () => {
  assertAllPass(await runConformance(createCounterEnv(), { toolCall: incrementBy2 }));
});

test('conformance: the same env served over HTTP and used through HttpEnvironment passes every check', async () => {
  const served = await serveEnvironment(createCounterEnv());
  try {
    const env = await HttpEnvironment.connect(served.url);
    assert.equal(env.info.name, 'counter');
    assertAllPass(await runConformance(env, { toolCall: incrementBy2 }));
    await env.close();
  } finally {
    await served.close();
  }
});

test('conformance: a fork that shares state with its original is caught', async () => {
  const base = createCounterEnv();
  const leaky: Environment = {
    ...base,
    info: base.info,
    reset: async (req) => {
      const ep = await base.reset(req);
      ep.fork = async () => ep; // the "fork" is the original itself
      return ep;
    },
  };
  const checks = await runConformance(leaky, { toolCall: incrementBy2 });
  const fork = checks.find((c) => c.name === 'fork independence');
  assert.equal(fork?.ok, false);
  assert.match(fork!.detail, /differs|changed/);
});

test('http: a full episode round-trips with the reward the env computes', async () => {
  const served = await serveEnvironment(createCounterEnv());
  try {
    const env = await HttpEnvironment.connect(served.url);
    assert.deepEqual(await env.listTasks(), [
      { id: 'count-to-3', split: 'train' },
      { id: 'count-to-5', split: 'train' },
    ]);
    const ep = await env.reset({ taskId: 'count-to-3' });
    assert.equal(ep.taskId, 'count-to-3');
    assert.equal(ep.initialMessages()[1].content, 'Please bring the counter to 3.');
    const call = (id: string, args: string) => ({
      type: 'tool_call' as const,
      call: { id, type: 'function' as const, function: { name: 'increment', arguments: args } },
    });
    assert.equal((await ep.step(call('c1', '{"by":1}'))).observation.content, '{"count":1}');
    const fork = await ep.fork();
    await ep.step(call('c2', '{"by":2}'));
    const end = await ep.step({ type: 'message', content: 'done' });
    assert.deepEqual([end.done, end.termination], [true, 'user_stop']);
    assert.deepEqual(await ep.evaluate([], 'user_stop'), {
      reward: 1,
      components: { COUNT: 1 },
      success: true,
      details: { count: 3 },
    });
    assert.equal((await fork.evaluate([], 'user_stop')).reward, 0, 'the fork kept count 1');
    await env.close();
  } finally {
    await served.close();
  }
});

async function raw(url: string, method: string, path: string, body?: string) {
  const res = await fetch(url + path, { method, body, headers: body ? { 'content-type': 'application/json' } : {} });
  return {
    status: res.status,
    body: (await res.json()) as { error?: { type: string; message: string } } & Record<string, unknown>,
  };
}

test('server: malformed requests get clear 4xx errors and never crash the server', async () => {
  const served = await serveEnvironment(createCounterEnv(), { maxBodyBytes: 1024 });
  const u = served.url;
  try {
    let r = await raw(u, 'POST', '/v1/episodes', '{"taskId": ');
    assert.equal(r.status, 400);
    assert.equal(r.body.error?.type, 'bad_request');
    assert.match(r.body.error!.message, /not valid JSON/);

    r = await raw(u, 'POST', '/v1/episodes', JSON.stringify({ task: 'count-to-3' }));
    assert.equal(r.status, 400);
    assert.match(r.body.error!.message, /reset request/);

    r = await raw(u, 'POST', '/v1/episodes', JSON.stringify({ seed: 1.5 }));
    assert.equal(r.status, 400);

    r = await raw(u, 'POST', '/v1/episodes', JSON.stringify({ taskId: 'count-to-3' }));
    assert.equal(r.status, 200);
    const id = r.body.episodeId as string;

    r = await raw(
      u,
      'POST',
      `/v1/episodes/${id}/step`,
      JSON.stringify({ action: { type: 'tool_call', call: { id: 'x', function: { name: 'increment' } } } }),
    );
    assert.equal(r.status, 400);
    assert.match(r.body.error!.message, /action\.call\.function\.arguments/);

    r = await raw(u, 'POST', `/v1/episodes/${id}/step`, JSON.stringify({ action: { type: 'dance' } }));
    assert.equal(r.status, 400);
    assert.match(r.body.error!.message, /action\.type/);

    r = await raw(
      u,
      'POST',
      `/v1/episodes/${id}/evaluate`,
      JSON.stringify({ messages: [{ role: 'robot' }], termination: 'agent_stop' }),
    );
    assert.equal(r.status, 400);
    assert.match(r.body.error!.message, /messages\.0/);

    r = await raw(u, 'POST', `/v1/episodes/${id}/evaluate`, JSON.stringify({ messages: [], termination: 'bored' }));
    assert.equal(r.status, 400);
    assert.match(r.body.error!.message, /termination/);

    r = await raw(u, 'POST', '/v1/episodes/nope/step', JSON.stringify({ action: { type: 'message', content: 'hi' } }));
    assert.deepEqual([r.status, r.body.error?.type], [404, 'unknown_episode']);
    r = await raw(u, 'DELETE', '/v1/episodes/nope');
    assert.deepEqual([r.status, r.body.error?.type], [404, 'unknown_episode']);

    r = await raw(u, 'GET', '/v1/nothing');
    assert.deepEqual([r.status, r.body.error?.type], [404, 'not_found']);
    r = await raw(u, 'DELETE', '/v1/info');
    assert.deepEqual([r.status, r.body.error?.type], [405, 'method_not_allowed']);

    r = await raw(u, 'POST', '/v1/episodes', JSON.stringify({ taskId: 'x'.repeat(2000) }));
    assert.deepEqual([r.status, r.body.error?.type], [413, 'payload_too_large']);
    // Nesting is refused before JSON.parse reads it (rerun 62b: 8 M levels held the loop 5 s).
    r = await raw(u, 'POST', '/v1/episodes', `{"taskId": ${'['.repeat(65)}${']'.repeat(65)}}`);
    assert.deepEqual([r.status, r.body.error?.type], [400, 'bad_request']);
    assert.match(r.body.error!.message, /request body nests arrays\/objects deeper than 64 levels/);

    // An exception inside the env is a 500 carrying its message.
    r = await raw(u, 'POST', '/v1/episodes', JSON.stringify({ taskId: 'no-such-task' }));
    assert.deepEqual([r.status, r.body.error?.type], [500, 'internal']);
    assert.match(r.body.error!.message, /unknown task 'no-such-task'/);

    // Unknown tools are the agent's mistake: a normal step whose observation says so.
    r = await raw(
      u,
      'POST',
      `/v1/episodes/${id}/step`,
      JSON.stringify({ action: { type: 'tool_call', call: { id: 'c', function: { name: 'fly', arguments: '{}' } } } }),
    );
    assert.equal(r.status, 200);
    assert.equal(r.body.error, true);
    assert.match((r.body.observation as { content: string }).content, /unknown tool 'fly'/);

    r = await raw(u, 'DELETE', `/v1/episodes/${id}`);
    assert.deepEqual([r.status, r.body], [200, {}]);
    r = await raw(u, 'POST', `/v1/episodes/${id}/fork`);
    assert.equal(r.status, 404, 'a deleted episode is gone');

    r = await raw(u, 'GET', '/v1/info');
    assert.equal(r.status, 200, 'the server is still serving');
  } finally {
    await served.close();
  }
});

test('server: an env answering the wrong shapes gets a 500 naming the field, and the server keeps serving', async () => {
  const base = createCounterEnv();
  const buggy: Environment = {
    ...base,
    info: base.info,
    reset: async (req) => {
      const ep = await base.reset(req);
      ep.step = async () => ({ observation: { role: 'robot', content: 'x' }, error: false, done: false }) as never;
      ep.evaluate = async () => ({ reward: 1, components: {}, success: true, details: { big: 10n } }) as never;
      return ep;
    },
  };
  const served = await serveEnvironment(buggy);
  try {
    const { episodeId } = (await raw(served.url, 'POST', '/v1/episodes', JSON.stringify({ seed: 1 }))).body as {
      episodeId: string;
    };
    let r = await raw(
      served.url,
      'POST',
      `/v1/episodes/${episodeId}/step`,
      JSON.stringify({ action: { type: 'message', content: 'hi' } }),
    );
    assert.deepEqual([r.status, r.body.error?.type], [500, 'internal']);
    assert.match(r.body.error!.message, /invalid StepResult: observation\.role/);
    r = await raw(
      served.url,
      'POST',
      `/v1/episodes/${episodeId}/evaluate`,
      JSON.stringify({ messages: [], termination: 'agent_stop' }),
    );
    assert.deepEqual([r.status, r.body.error?.type], [500, 'internal']);
    assert.match(r.body.error!.message, /not JSON/);
    assert.equal((await raw(served.url, 'GET', '/v1/info')).status, 200);
  } finally {
    await served.close();
  }
});

test('server: idle episodes expire', async () => {
  const served = await serveEnvironment(createCounterEnv(), { idleTimeoutMs: 100 });
  try {
    const env = await HttpEnvironment.connect(served.url);
    const ep = await env.reset({ seed: 3 });
    await sleep(400);
    await assert.rejects(
      ep.step({ type: 'message', content: 'hi' }),
      (e: unknown) => e instanceof EnvProtocolError && e.type === 'unknown_episode',
    );
    await ep.close(); // closing an expired episode is not an error
  } finally {
    await served.close();
  }
});

test('client: a server answering the wrong shapes is rejected with the bad field named', async () => {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        req.url === '/v1/info'
          ? { info: { name: 'x', kind: 'weird', description: '' }, tools: [], systemPrompt: '' }
          : {},
      ),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await assert.rejects(HttpEnvironment.connect(url), /info\.kind/);
  } finally {
    server.close();
  }
});

test('registry: http:<url> opens a served env through the protocol client', async () => {
  const { openEnvironment } = await import('../envs/registry.js');
  const { parseConfig } = await import('../core/config.js');
  const served = await serveEnvironment(createCounterEnv());
  try {
    for (const name of [`http:${served.url}`, served.url]) {
      const config = parseConfig({ env: { name } });
      const env = await openEnvironment(config.env, { config });
      assert.deepEqual(
        (await env.listTasks()).map((t) => t.id),
        ['count-to-3', 'count-to-5'],
      );
    }
  } finally {
    await served.close();
  }
});

test('serve-main: a sandboxed module served over HTTP passes conformance, and a stdlib Python client plays an episode', async () => {
  const { execa } = await import('execa');
  const server = execa(
    'node',
    ['--import', 'tsx', 'envs/protocol/serve-main.ts', '--module', 'test/fixtures/sandbox/good-env.ts'],
    { buffer: false, reject: false },
  );
  try {
    const first = await new Promise<string>((resolve, reject) => {
      let out = '';
      server.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]);
      });
      server.once('exit', () => reject(new Error('serve-main exited before printing its URL')));
    });
    const { url, env: name, isolation } = JSON.parse(first) as { url: string; env: string; isolation: string };
    assert.equal(name, 'counter');
    assert.ok(isolation, 'a --module server reports its sandbox isolation');
    const env = await HttpEnvironment.connect(url);
    assertAllPass(await runConformance(env, { toolCall: incrementBy2 }));

    const py = `
import json, sys, urllib.request
base = sys.argv[1]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())
ep = call("POST", "/v1/episodes", {"taskId": "count-to-3"})
for i, by in enumerate([1, 2]):
    call("POST", f"/v1/episodes/{ep['episodeId']}/step", {"action": {"type": "tool_call", "call": {"id": f"c{i}", "type": "function", "function": {"name": "increment", "arguments": json.dumps({"by": by})}}}})
print(json.dumps(call("POST", f"/v1/episodes/{ep['episodeId']}/evaluate", {"messages": ep["initialMessages"], "termination": "agent_stop"})))
`;
    const r = await execa('python3', ['-c', py, url]);
    assert.deepEqual(JSON.parse(r.stdout), {
      reward: 1,
      components: { COUNT: 1 },
      success: true,
      details: { count: 3 },
    });
  } finally {
    server.kill('SIGTERM');
    const done = await server;
    assert.equal(done.exitCode, 0, `serve-main did not stop cleanly: ${done.signal ?? done.exitCode}`);
  }
});

test('conformance-main: the CLI runs the suite against a URL and fails on a non-conforming server', async () => {
  const { execa } = await import('execa');
  const cli = ['--import', 'tsx', 'envs/protocol/conformance-main.ts'];
  const served = await serveEnvironment(createCounterEnv());
  const broken = await serveEnvironment({ ...createCounterEnv(), tools: () => [] });
  try {
    const ok = await execa('node', [...cli, served.url, '--tool-call', 'increment', '--tool-args', '{"by":2}'], {
      reject: false,
    });
    assert.equal(ok.exitCode, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /all \d+ checks passed/);
    const bad = await execa('node', [...cli, broken.url], { reject: false });
    assert.equal(bad.exitCode, 1);
    assert.match(bad.stdout, /FAIL tools: tools\(\) is empty/);
  } finally {
    await served.close();
    await broken.close();
  }
});

test('client: an unreachable server is a one-line error naming the URL', async () => {
  const served = await serveEnvironment(createCounterEnv());
  const url = served.url;
  await served.close();
  await assert.rejects(
    HttpEnvironment.connect(url),
    (e: unknown) => e instanceof EnvProtocolError && e.type === 'unreachable' && e.message.includes(url),
  );
});

test("client: an episode id that is not short and URL-safe is the env's error, named, not a throw in a later call (rerun 84a: a lone surrogate, a 4 MB id; 85a: `..`)", async () => {
  const real = await serveEnvironment(createCounterEnv());
  const info = await (await fetch(`${real.url}/v1/info`)).text();
  await real.close();
  for (const episodeId of ['\ud800', 'x'.repeat(4 << 20), 'a/b', '..', '.']) {
    // A server like the counter env's, but for the id its reset answers.
    const server = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(req.url === '/v1/info' ? info : JSON.stringify({ episodeId, taskId: 't', initialMessages: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const env = await HttpEnvironment.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      await assert.rejects(env.reset({ taskId: 't' }), (e: Error) => {
        assert.ok(e instanceof EnvProtocolError, String(e));
        assert.match(e.message, /episodeId/);
        return true;
      });
    } finally {
      server.close();
    }
  }
});
