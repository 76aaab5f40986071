import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { hmacSha256, utf8 } from '../envs/sandbox/hmac-sha256.js';

/** The runner MACs its lines in plain JavaScript; the worker checks them with Node's crypto. */
test('sandbox hmac: the runner MAC equals Node crypto HMAC-SHA256 (lengths around the block edges, non-ASCII, lone surrogates)', () => {
  const key = randomBytes(32);
  const mac = hmacSha256(key);
  const messages = ['', 'a', '{"id":1,"status":200}', 'é漢字🙂', '\ud800 lone', 'tail \udfff', 'x'.repeat(1 << 20)];
  for (let n = 0; n < 200; n++) messages.push(randomBytes(n).toString('latin1'));
  for (const m of messages)
    assert.equal(mac(utf8(m)), createHmac('sha256', key).update(m).digest('hex'), `length ${m.length}`);
  assert.notEqual(hmacSha256(randomBytes(32))(utf8('a')), mac(utf8('a')), 'another key, another MAC');
});
