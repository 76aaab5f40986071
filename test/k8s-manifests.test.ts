import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const root = path.resolve(import.meta.dirname, '..');
const dir = path.join(root, 'infra/k8s');
const validator = path.join(root, '.venv/bin/kubernetes-validate');
const run = promisify(execFile);

// kustomization.yaml is kustomize's own config, not a cluster resource.
const manifests = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .sort();

type Doc = { kind: string; metadata: { name: string }; spec?: any; data?: Record<string, string> };
const docs: Doc[] = manifests.flatMap((f) =>
  parseAllDocuments(readFileSync(path.join(dir, f), 'utf8')).map((d) => d.toJS() as Doc),
);
const find = (kind: string, name: string) => {
  const d = docs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(d, `${kind}/${name} missing`);
  return d;
};

test(
  'every manifest validates against the bundled Kubernetes schemas (strict, offline)',
  {
    skip:
      !existsSync(validator) && 'kubernetes-validate not installed (scripts/setup.sh installs infra/requirements.txt)',
  },
  async () => {
    const files = manifests.map((f) => path.join(dir, f));
    const { stdout } = await run(validator, ['--strict', ...files]);
    assert.equal((stdout.match(/ passed for resource /g) ?? []).length, docs.length, stdout);
  },
);

test(
  'the validator rejects a broken manifest (so the check above can fail)',
  { skip: !existsSync(validator) && 'kubernetes-validate not installed' },
  async () => {
    const tmp = await mkdtemp(path.join(tmpdir(), 'k8s-'));
    try {
      const bad = path.join(tmp, 'bad.yaml');
      const gpu = readFileSync(path.join(dir, 'worker-gpu.yaml'), 'utf8').replace(
        'terminationGracePeriodSeconds: 300',
        'terminationGracePeriodSeconds: soon',
      );
      await writeFile(bad, gpu);
      await assert.rejects(run(validator, ['--strict', bad]), (e: { stdout: string }) =>
        /did not validate/.test(e.stdout),
      );
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  },
);

test('kustomization lists every manifest', () => {
  const k = parseAllDocuments(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'))[0].toJS() as {
    resources: string[];
  };
  assert.deepEqual([...k.resources].sort(), manifests);
});

test('GPU workers request nvidia.com/gpu and run one activity per GPU', () => {
  const gpu = find('Deployment', 'trace-worker-gpu');
  const c = gpu.spec.template.spec.containers[0];
  const limit = Number(c.resources.limits['nvidia.com/gpu']);
  assert.ok(limit >= 1);
  assert.equal(Number(c.resources.requests['nvidia.com/gpu']), limit);
  const count = c.env.find((e: { name: string }) => e.name === 'TRACE_GPU_COUNT');
  assert.equal(Number(count.value), limit, 'activity concurrency must equal the GPU count');
  assert.deepEqual(c.command, ['node', 'cli/trace.mjs', 'worker', '--queues', 'gpu']);
});

test('CPU workers scale horizontally and read Temporal/S3/LLM settings from ConfigMap and Secrets', () => {
  const cpu = find('Deployment', 'trace-worker-cpu');
  const hpa = find('HorizontalPodAutoscaler', 'trace-worker-cpu');
  assert.equal(hpa.spec.scaleTargetRef.name, 'trace-worker-cpu');
  assert.ok(hpa.spec.maxReplicas > hpa.spec.minReplicas);
  const c = cpu.spec.template.spec.containers[0];
  const sources = c.envFrom.map((e: any) => e.configMapRef?.name ?? e.secretRef?.name);
  for (const s of ['trace-config', 'trace-temporal-auth', 'trace-temporal-mtls', 'trace-s3', 'trace-llm'])
    assert.ok(sources.includes(s), s);
  const config = find('ConfigMap', 'trace-config').data!;
  for (const k of ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'TRACE_LLM_BASE_URL']) assert.ok(config[k], k);
  // The mTLS paths point at the mounted Secret's files.
  const mtls = find('ConfigMap', 'trace-temporal-mtls').data!;
  const mount = c.volumeMounts.find((m: { name: string }) => m.name === 'temporal-tls').mountPath;
  assert.equal(path.dirname(mtls.TEMPORAL_TLS_CERT), mount);
});

test('vLLM policy server loads LoRA adapters at runtime', () => {
  const v = find('Deployment', 'trace-policy-vllm').spec.template.spec.containers[0];
  assert.ok(v.args.includes('--enable-lora'));
  assert.ok(
    v.env.some(
      (e: { name: string; value?: string }) => e.name === 'VLLM_ALLOW_RUNTIME_LORA_UPDATING' && e.value === 'True',
    ),
  );
  const svc = find('Service', 'trace-policy-vllm');
  assert.ok(find('ConfigMap', 'trace-config').data!.TRACE_LLM_BASE_URL.includes(`${svc.metadata.name}.trace.svc`));
});

test('workers run the compiled CLI that the image builds, not TypeScript through tsx at every start', () => {
  const cpu = find('Deployment', 'trace-worker-cpu').spec.template.spec.containers[0];
  assert.deepEqual(cpu.command, ['node', 'cli/trace.mjs', 'worker', '--queues', 'cpu']);
  const dockerfile = readFileSync(path.join(dir, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /^RUN node cli\/build\.mjs$/m, 'the image builds .build/cli');
  assert.match(dockerfile, /^CMD \["node", "cli\/trace\.mjs", "worker", "--queues", "cpu"\]$/m);
  // A bundle from the build context (another node, another root) would only be stale in the image.
  assert.match(readFileSync(path.join(dir, 'Dockerfile.dockerignore'), 'utf8'), /^\.build$/m);
  for (const f of [...manifests, 'Dockerfile'])
    assert.doesNotMatch(readFileSync(path.join(dir, f), 'utf8'), /--import", "tsx"|workers\/(cpu|gpu)\.ts/, f);
});

test('the image installs production dependencies only, and they hold every package the run-time code imports', () => {
  const dockerfile = readFileSync(path.join(dir, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /^RUN npm ci .*--omit=dev/m);
  // Validation's type-check (activities/synthesis/typecheck-worker.ts) imports typescript and loads
  // @types/node (types: ['node']) in the worker at run time, so both must survive --omit=dev.
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const needed = new Set(['@types/node']);
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? e.name === 'node_modules'
          ? []
          : walk(path.join(d, e.name))
        : /\.(ts|mjs|js)$/.test(e.name)
          ? [path.join(d, e.name)]
          : [],
    );
  for (const top of ['activities', 'agent', 'cli', 'core', 'envs', 'llm', 'store', 'workers', 'workflows']) {
    for (const f of walk(path.join(root, top))) {
      for (const m of readFileSync(f, 'utf8').matchAll(
        /(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*['"]([^'".#/][^'"]*)['"]|\bimport\(\s*['"]([^'".#/][^'"]*)['"]\s*\)/g,
      )) {
        const spec = m[1] ?? m[2];
        if (spec.startsWith('node:')) continue;
        needed.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
  }
  const missing = [...needed].filter((p) => !(p in pkg.dependencies));
  assert.deepEqual(missing, [], 'imported at run time but not a production dependency');
});
