import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedMemoryIn } from '../envs/sandbox/wasm-guard.js';
import { WASM } from './helpers/wasm-binaries.js';

test('sharedMemoryIn: a declared or imported shared memory is found; plain modules and non-wasm bytes pass to V8', () => {
  assert.equal(sharedMemoryIn(new Uint8Array(WASM.sharedMemory)), 'the module declares a shared memory');
  assert.equal(sharedMemoryIn(new Uint8Array(WASM.importedSharedMemory)), 'the module imports a shared memory');
  assert.equal(sharedMemoryIn(new Uint8Array(WASM.plainMemory)), undefined);
  assert.equal(sharedMemoryIn(new Uint8Array([1, 2, 3])), undefined, 'not wasm: V8 gives its own CompileError');
  for (const b of [WASM.sharedMemory, WASM.importedSharedMemory, WASM.plainMemory])
    assert.ok(WebAssembly.validate(new Uint8Array(b)), 'the fixtures are valid modules (outside the sandbox)');
});

test('sharedMemoryIn: a binary whose sections cannot be read is refused, not passed on', () => {
  // The memory section's entry cut short (its size byte fixed to match), and a section claiming
  // more bytes than there are.
  const at = 8 + 7 + 4; // after the header, the type and the function sections
  const cut = [...WASM.plainMemory.slice(0, at), 5, 2, 1, 1];
  assert.deepEqual(WASM.plainMemory.slice(at, at + 2), [5, 4], 'the memory section starts there');
  assert.equal(sharedMemoryIn(new Uint8Array(cut)), "the module's sections cannot be read (unexpected end)");
  const overlong = [...WASM.plainMemory.slice(0, 8), 5, 0x7f, 1, 3, 1, 1];
  assert.match(sharedMemoryIn(new Uint8Array(overlong)) ?? '', /runs past the end/);
  // An unknown import kind cannot be skipped, so nothing after it could be checked.
  const badImport = [...WASM.plainMemory.slice(0, 8), 2, 6, 1, 1, 0x6d, 1, 0x6d, 9];
  assert.match(sharedMemoryIn(new Uint8Array(badImport)) ?? '', /import kind 9/);
});
