import { buildBundle, BundleError, syntaxProblem, type CompileRequest, type CompileResponse } from './bundle.js';

/**
 * One compile of a module's text, in a process of its own (`compiler.ts` starts it): the request
 * is a JSON line on stdin, the answer a JSON line on stdout, then the process ends. esbuild and its
 * service process die with it, whatever the text made them do.
 */
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => (input += chunk));
process.stdin.on('end', () => void answer(JSON.parse(input) as CompileRequest));

async function answer(req: CompileRequest): Promise<void> {
  let res: CompileResponse;
  try {
    res =
      req.op === 'bundle'
        ? { ok: true, files: await buildBundle(req.input, req.outFile) }
        : { ok: true, problem: await syntaxProblem(req.source) };
  } catch (err) {
    if (!(err instanceof BundleError)) throw err;
    res = { ok: false, message: err.message };
  }
  process.stdout.write(`${JSON.stringify(res)}\n`, () => process.exit(0));
}
