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

/**
 * Makes a stand-in that throws the refusal of `what` when called or constructed; `Network` for the
 * networking modules, which the worker reports as `network` (there is none), else `Sandbox`.
 */
export type Refused = (what: string, permission?: 'Sandbox' | 'Network') => () => never;

/** A Node builtin module's exports object, as the runner patches it (before the module exists). */
export const builtin = (id: string) =>
  (process as unknown as { getBuiltinModule: (id: string) => Record<string, unknown> }).getBuiltinModule(id);
