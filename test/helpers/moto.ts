import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A real S3-compatible server process on loopback: moto's server mode from the project venv
 * (PyPI moto[server], installed by scripts/setup.sh), on an ephemeral port. Not an in-process stub:
 * the S3 backend talks HTTP to it through @aws-sdk/client-s3 exactly as it would to AWS or MinIO.
 */
export interface MotoServer {
  endpoint: string;
  close(): Promise<void>;
}

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MOTO_SERVER_BIN = path.join(REPO_ROOT, '.venv/bin/moto_server');

export async function startMoto(timeoutMs = 30_000): Promise<MotoServer> {
  if (!existsSync(MOTO_SERVER_BIN)) throw new Error(`${MOTO_SERVER_BIN}: not found; run scripts/setup.sh`);
  const child = spawn(MOTO_SERVER_BIN, ['-H', '127.0.0.1', '-p', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const port = await announcedPort(child, timeoutMs);
    const endpoint = `http://127.0.0.1:${port}`;
    await waitUntilAnswering(endpoint, timeoutMs);
    return {
      endpoint,
      close: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  } catch (e) {
    child.kill('SIGKILL');
    await exited;
    throw e;
  }
}

/** Werkzeug prints "Running on http://127.0.0.1:<port>" once bound; port 0 makes that port ephemeral. */
function announcedPort(child: ChildProcess, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => reject(new Error(`moto_server did not announce its port within ${timeoutMs} ms: ${output.slice(-500)}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /Running on http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`moto_server exited with code ${code} before serving: ${output.slice(-500)}`));
    });
  });
}

async function waitUntilAnswering(endpoint: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`${endpoint}/moto-api/`);
      await res.arrayBuffer();
      return;
    } catch (e) {
      if (Date.now() > deadline)
        throw new Error(`moto_server at ${endpoint} did not answer within ${timeoutMs} ms: ${e}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
