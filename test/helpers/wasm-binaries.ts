/**
 * Hand-assembled WebAssembly modules for the sandbox's shared-memory refusal. Each exports `w`:
 * in the first two a `memory.atomic.wait32` with a 300 ms timeout (on a shared memory it declares,
 * or one it imports as `m.m`), which outside the sandbox blocks for 300 ms of real time and
 * returns 2 (timed out); in the third `i32.const 42` beside a plain memory.
 */
const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const section = (id: number, content: number[]) => [id, content.length, ...content];
const TYPES = section(1, [1, 0x60, 0, 1, 0x7f]); // one type: () -> i32
const FUNCS = section(3, [1, 0]);
const EXPORT_W = section(7, [1, 1, 0x77, 0, 0]);
// i32.const 0, i32.const 0, i64.const 300_000_000 (ns), memory.atomic.wait32 align 2 offset 0
const WAIT_BODY = [0, 0x41, 0, 0x41, 0, 0x42, 0x80, 0xc6, 0x86, 0x8f, 0x01, 0xfe, 0x01, 0x02, 0x00, 0x0b];
const code = (body: number[]) => section(10, [1, body.length, ...body]);
// Memory limits: flags 3 = shared with a maximum, 1 = a maximum; min 1, max 1 page.
const SHARED_LIMITS = [3, 1, 1];

export const WASM = {
  sharedMemory: [...HEADER, ...TYPES, ...FUNCS, ...section(5, [1, ...SHARED_LIMITS]), ...EXPORT_W, ...code(WAIT_BODY)],
  importedSharedMemory: [
    ...HEADER,
    ...TYPES,
    ...section(2, [1, 1, 0x6d, 1, 0x6d, 2, ...SHARED_LIMITS]),
    ...FUNCS,
    ...EXPORT_W,
    ...code(WAIT_BODY),
  ],
  plainMemory: [...HEADER, ...TYPES, ...FUNCS, ...section(5, [1, 1, 1, 1]), ...EXPORT_W, ...code([0, 0x41, 42, 0x0b])],
};
