/**
 * The error a runner guard throws for a use of an API past what the sandbox allows: shaped as Node's
 * permission errors (`ERR_ACCESS_DENIED`), so the worker reports it as `permission`, naming `what`.
 */
export function refusal(what: string, message: string): Error {
  return Object.assign(new Error(`sandbox: ${what}: ${message}`), {
    code: 'ERR_ACCESS_DENIED',
    permission: 'Sandbox',
    resource: what,
  });
}
