import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Message } from '../core/messages.js';
import { actionMessage, type AgentAction } from '../envs/environment.js';
import { anchorMiss, goldAnchorOf, termsOf } from '../envs/gold-anchor.js';
import { call, say } from '../envs/sdk/index.js';

const instance = JSON.stringify({
  initialState: {
    customers: { cus_7: { name: 'Ada Lovelace', email: 'ada@example.com' } },
    status: 'shipped',
    flag: 'no',
  },
  userGoal: 'Hi, my email is ada@example.com. How much did I spend on my shipped orders?',
});
const gold = [
  call('find_customer_by_email', { email: 'ada@example.com' }),
  call('list_orders', { customer_id: 'cus_7' }),
  say('Ada Lovelace, you spent $1,234.50 on 3 shipped orders (ORD-17 the largest). No more.'),
];
// The instance holds gold too (its canonical JSON is the whole generated instance).
const withGold = JSON.stringify({ ...JSON.parse(instance), gold });
const anchor = goldAnchorOf({ gold, instance: withGold })!;
const episode = (...actions: AgentAction[]): Message[] => actions.map(actionMessage);

/** The anchor of a gold that only speaks `words`, over an instance of `values`. */
const anchorOf = (words: string, values: Record<string, unknown>) =>
  goldAnchorOf({ gold: [say(words)], instance: JSON.stringify(values) })!;
/** Whether an episode that only says `reply` meets the anchor. */
const pays = (a: ReturnType<typeof anchorOf>, reply: string) => anchorMiss(a, episode(say(reply))) === undefined;

test('gold anchor: the facts are the numbers and instance values gold says', () => {
  // "no" is an instance value too short to be data, "more" not one, the goal prose and gold's own
  // words no data; "shipped" is one though the user said it too (rerun 39: a question listing every
  // status took the answer's status out of the facts).
  assert.deepEqual(new Set(anchor.facts), new Set([1234.5, 3, 'ord 17', 'ada lovelace', 'shipped']));
  // A count beside the answer does not stand for it (rerun 38: a count with a wrong status was paid 1).
  const status = goldAnchorOf({ gold: [say('Your 3 orders are shipped.')], instance: withGold })!;
  assert.deepEqual(new Set(status.facts), new Set([3, 'shipped']));
  assert.match(
    anchorMiss(status, episode(say('You have 3 orders; they are pending.')))!.what,
    /does not say "shipped"/,
  );
  assert.equal(anchorMiss(status, episode(say('ok')))?.part, 'words');
  // Facts are whole words: "unshipped" does not say "shipped".
  assert.equal(anchorMiss(status, episode(say('Your 3 orders are unshipped.')))?.part, 'words');
  assert.equal(anchorMiss(status, episode(say('All 3 are SHIPPED!'))), undefined);
  // A value of more than four words is one fact, said whole (rerun 39: a five-word product name was none).
  const product = goldAnchorOf({
    gold: [say('Your order is the Deluxe Ergonomic Standing Desk Pro, as 2 boxes.')],
    instance: JSON.stringify({
      product: 'Deluxe  Ergonomic Standing Desk Pro',
      other: 'Deluxe Ergonomic Standing Chair Pro',
    }),
  })!;
  // The other product's capitalized words gold says are facts too (a name said in part).
  assert.deepEqual(
    new Set(product.facts),
    new Set([2, 'deluxe ergonomic standing desk pro', 'deluxe', 'ergonomic', 'standing', 'pro']),
  );
  assert.equal(anchorMiss(product, episode(say('2 boxes: deluxe ergonomic standing desk pro.'))), undefined);
  assert.equal(anchorMiss(product, episode(say('2 boxes: Deluxe Ergonomic Standing Chair Pro.')))?.part, 'words');
  assert.equal(anchor.speech, 'after_last_call');
  assert.deepEqual(
    anchor.calls.map((c) => c.name),
    ['find_customer_by_email', 'list_orders'],
  );
});

test("gold anchor: an episode must make gold's calls (extra calls and arguments allowed) and say its facts", () => {
  const [find, list] = gold;
  const answer = say('Ada Lovelace: 1234.50 in total over 3 shipped orders; ORD-17 was the biggest.');
  assert.equal(anchorMiss(anchor, episode(find, list, answer)), undefined);
  // Order, repeats and extra arguments do not matter; each of gold's values must be the same.
  const more = call('find_customer_by_email', { email: 'ada@example.com', extra: 1 });
  assert.equal(anchorMiss(anchor, episode(list, more, list, answer)), undefined);
  for (const email of ['ADA@example.com', ' ada@example.com'])
    assert.equal(anchorMiss(anchor, episode(call('find_customer_by_email', { email }), list, answer))?.part, 'calls');
  // A missing call, or one with another argument, is a miss of the calls.
  assert.equal(anchorMiss(anchor, episode(find, answer))?.part, 'calls');
  const other = call('list_orders', { customer_id: 'cus_8' });
  assert.match(
    anchorMiss(anchor, episode(find, other, answer))!.what,
    /no call list_orders\({"customer_id":"cus_7"}\)/,
  );
  // Gold's calls with a word that says none of gold's facts, or all but one, miss the words.
  assert.equal(anchorMiss(anchor, episode(find, list, list, say('ok')))?.part, 'words');
  const noId = say('Ada Lovelace: 1234.50 over 3 shipped orders.');
  assert.match(anchorMiss(anchor, episode(find, list, noId))!.what, /does not say "ord 17"/);
  // Silent after the last call where gold speaks there: less speech.
  assert.match(anchorMiss(anchor, episode(answer, find, list))!.what, /speaks less than gold/);
});

test('gold anchor: a gold that calls each tool twice needs both calls; the floor holds a silent gold to speak', () => {
  const twice = goldAnchorOf({ gold: [call('refund', { id: 'a' }), call('refund', {})], instance: '{}' })!;
  assert.equal(twice.facts.length, 0);
  // The argument-free call does not take the one whose arguments gold names.
  assert.equal(anchorMiss(twice, episode(call('refund', { id: 'a' })))?.part, 'calls');
  assert.equal(anchorMiss(twice, episode(call('refund', { id: 'b' }), call('refund', { id: 'a' }))), undefined);
  assert.equal(anchorMiss(twice, episode(call('refund', { id: 'a' }), call('refund', { id: 'b' }))), undefined);
  // An amount to the cent is gold's amount, however gold's float sum came out (rerun 38).
  const sum = goldAnchorOf({ gold: [call('submit_total', { total: 0.1 + 0.2 })], instance: '{}' })!;
  assert.equal(anchorMiss(sum, episode(call('submit_total', { total: 0.3 }))), undefined);
  assert.equal(anchorMiss(sum, episode(call('submit_total', { total: 0.31 })))?.part, 'calls');
  const silent = goldAnchorOf({ gold: [call('refund', {})], instance: '{}' })!;
  assert.equal(anchorMiss(silent, episode(call('refund', {}))), undefined);
  assert.equal(anchorMiss(silent, episode(call('refund', {})), 'after_last_call')?.part, 'words');
  assert.equal(anchorMiss(silent, episode(call('refund', {}), say('Refunded.')), 'after_last_call'), undefined);
});

test('gold anchor: an instance value is a fact in the forms people write it (rerun 40)', () => {
  // Gold "Of your 4 orders, the most expensive one is <said>." over an instance storing <stored>.
  const factsOf = (stored: string, said: string) =>
    goldAnchorOf({
      gold: [say(`Of your 4 orders, the most expensive one is ${said}.`)],
      instance: JSON.stringify({ orders: [{ status: stored, total: 12.5 }], other: 'pending' }),
    })!;
  const cases: [stored: string, said: string, right: string, wrong: string][] = [
    ['in_transit', 'in transit', 'It is In-Transit; 4 orders.', 'It is pending; 4 orders.'],
    ['IN_TRANSIT', 'in transit', '4 orders, the top one in transit', '4 orders, the top one transiting'],
    ['inTransit', 'in transit', 'in transit (of 4)', '4 orders, pending'],
    ['out-for-delivery', 'out for delivery', 'Out for delivery, of 4.', '4, awaiting delivery'],
    ['M', 'size M', 'Size M; 4 orders.', "I'm sure: size XL, of 4."],
    ['XL', 'XL', 'of 4, an XL', 'of 4, an L'],
    ['Ito, Lena', 'Lena Ito', '4 orders; Ito, Lena.', '4 orders; Lena Ota.'],
    ['Lena Ito', 'Lena', 'Lena, 4 orders', 'Lara, 4 orders'],
    ['laptop', 'the laptops', 'a laptop, 4 orders', 'a tablet, 4 orders'],
    ['Café Olé', 'Cafe Ole', 'café olé ×4', 'cafe, 4 of them'],
    ['3', 'three items', '3 items of 4', 'four items, 4'],
    ['2024-03-05', 'March 5, 2024', 'Mar 5, 2024 (4 orders)', 'April 5, 2024 (4 orders)'],
    ['2024-03-05', '2024-03-05', 'on 2024-03-05, 4 orders', 'on 2024-04-05, 4 orders'],
  ];
  for (const [stored, said, right, wrong] of cases) {
    const a = factsOf(stored, said);
    const what = `${stored} said "${said}": ${JSON.stringify(a.facts)}`;
    assert.equal(anchorMiss(a, episode(say(right))), undefined, `${what}; "${right}"`);
    // The count alone, or the count with a wrong answer, was paid as gold (rerun 40: 16/16).
    assert.equal(anchorMiss(a, episode(say('You have 4 orders.')))?.part, 'words', what);
    assert.equal(anchorMiss(a, episode(say(wrong)))?.part, 'words', `${what}; "${wrong}"`);
  }
  // "One" is no count of gold's (a pronoun), and a function word of a value no fact.
  assert.deepEqual(factsOf('in_transit', 'one').facts, [4]);
});

test('gold anchor: codes keep their case and signs, a possessive is its name, and words a value holds are facts only as gold names them (rerun 41)', () => {
  // A country code that is also a word ("US", "IN", "IT"), a grade whose sign is the answer.
  const country = anchorOf('Of your 4 orders, the most expensive one ships to US.', { c: ['US', 'CA', 'IN'] });
  assert.ok(pays(country, 'It ships to US (4 orders).'));
  for (const wrong of ['You have 4 orders.', 'Of your 4 orders, the most expensive one ships to CA.', 'ships to us, 4'])
    assert.ok(!pays(country, wrong), wrong);
  const grade = anchorOf('Of your 4 orders, the most expensive one is grade B+.', { g: ['B+', 'B-', 'B', 'A+', 'A'] });
  assert.ok(pays(grade, 'Grade B+, of 4.'));
  for (const wrong of ['Of your 4 orders, the most expensive one is grade B-.', 'grade B, 4 orders'])
    assert.ok(!pays(grade, wrong), wrong);
  const top = anchorOf('Of your 4 orders, the most expensive one is grade A+.', { g: ['A+', 'A'] });
  assert.ok(!pays(top, 'Of your 4 orders, the most expensive one is grade A.'));
  // "Lena's" says Lena, in gold and in a reply.
  const possessive = anchorOf("Of your 4 orders, Lena's was the most expensive.", { r: ['Lena', 'Omar'] });
  assert.ok(pays(possessive, 'For Lena: the priciest of 4.'));
  for (const wrong of ['You have 4 orders.', "Of your 4 orders, Omar's was the most expensive."])
    assert.ok(!pays(possessive, wrong), wrong);
  assert.ok(pays(anchorOf('It was for Lena.', { r: ['Lena'] }), "Lena's was."));
  // The minus sign is a minus.
  assert.ok(!pays(anchorOf('It fell by \u22125 points.', {}), 'It moved by 5 points.'));
  // A plural and its singular are one term, an "e" before the "s" or not.
  assert.ok(pays(anchorOf('All your purchases.', { kind: 'purchase' }), 'Every purchase.'));
  assert.ok(pays(anchorOf('Two boxes.', { kind: 'box' }), '2 box'));
  // A common word of a stored value is no fact where gold does not name the value (rerun 41: the
  // reference envs' rewordings were capped on 19 and 11 of 20 seeds).
  const common = anchorOf('Your reservation: the most expensive one.', {
    trip: 'one_way',
    tool: 'update_reservation_baggages',
  });
  assert.deepEqual(common.facts, []);
  // A compatibility character is not expanded: U+FDFA is 18 characters under NFKD (rerun 41: seconds per reset).
  assert.equal(termsOf('\ufdfa'.repeat(505)).join('').length, 505);
});

test('gold anchor: a code that is also a word goes with the word before it; lower-case codes; names said first; plurals that are names (rerun 42)', () => {
  // "I" and "A" are words of any reply: "I checked" says no tier I.
  const tier = anchorOf('Of your 4 orders, the most expensive one is tier I.', { v: ['I', 'II', 'III'] });
  assert.ok(pays(tier, 'Tier I, of 4.'));
  for (const wrong of ['I checked: you have 4 orders.', 'I found 4 orders; the most expensive one is tier III.'])
    assert.ok(!pays(tier, wrong), wrong);
  const grade = anchorOf('Of your 4 orders, the most expensive one is grade A.', { g: ['A', 'B', 'C'] });
  assert.ok(!pays(grade, 'A quick check: of your 4 orders, the most expensive one is grade C.'));
  // Read where gold writes the code as stored: the word "in" is not the country IN (rerun 44).
  const country = anchorOf('The one placed in March is the most expensive of 4; it ships to IN.', { c: ['IN', 'US'] });
  assert.ok(pays(country, 'You have 4 orders. It ships to IN.'));
  assert.ok(!pays(country, 'The one placed in March is the most expensive of 4; it ships to US.'));
  // Codes stored in lower case are codes as gold writes them.
  const size = anchorOf('Of your 4 orders, the most expensive one is size M.', { s: ['m', 'l', 'xl'] });
  assert.ok(pays(size, 'Size M, of 4.'));
  assert.ok(!pays(size, 'Of your 4 orders, the most expensive one is size L.'));
  // Louise is not Louis.
  const louise = anchorOf('Of your 4 orders, the most expensive one was for Louise.', { r: ['Louise', 'Louis'] });
  assert.ok(!pays(louise, 'Of your 4 orders, the most expensive one was for Louis.'));
  // A name said in part at the start of a sentence, after a title, or in a script without case.
  for (const [words, stored, wrong] of [
    [
      'Lena got the most expensive of your 4 orders.',
      ['Lena Ito', 'Omar Diaz'],
      'Omar got the most expensive of your 4 orders.',
    ],
    [
      'Of your 4 orders, the priciest went to Dr. Patel.',
      ['Anika Patel', 'Raj Shah'],
      'Of your 4 orders, the priciest went to Dr. Shah.',
    ],
    [
      'Of your 4 orders, the most expensive is for \u0645\u062d\u0645\u062f.',
      ['\u0645\u062d\u0645\u062f \u0639\u0644\u064a'],
      'Of your 4 orders, the most expensive is for you.',
    ],
  ] as const) {
    const a = anchorOf(words, { r: stored });
    assert.ok(pays(a, words), words);
    assert.ok(!pays(a, wrong), wrong);
  }
  // Letters outside the BMP are letters.
  assert.deepEqual(termsOf('\u{1d40b}\u{1d41e}'), ['\u{1d40b}\u{1d41e}'.toLowerCase()]);
});

test('gold anchor: punctuation around a word is stripped in time linear in it (rerun 41: a 64 KiB run of dashes held the worker 67 s)', () => {
  const cost = (words: string) => {
    const start = process.cpuUsage();
    goldAnchorOf({ gold: [say(words)], instance: '{}' });
    const used = process.cpuUsage(start);
    return used.user + used.system;
  };
  const n = 24_000;
  cost('warm up the JIT — x');
  const plain = cost(`x ${'a '.repeat(n / 2)}y`);
  const dashes = cost(`x${'\u2014'.repeat(n)}y`);
  // The same length of text: quadratic stripping was about 10 000 times the plain text's cost here.
  assert.ok(dashes < 50 * Math.max(plain, 1000), `${dashes} µs for one word of dashes, ${plain} µs for words`);
});

test('gold anchor: gold says every fact of its own words, however they are written', () => {
  for (const text of [
    'Down -5% to $1,234.50.',
    '(ORD-17) at 12:30pm, 3/4 full',
    '1.5k seats; №5; 007.',
    'Итого 12,5 € — 2024-05-03!',
  ]) {
    const a = goldAnchorOf({ gold: [say(text)], instance: '{}' })!;
    assert.ok(a.facts.length > 0, text);
    assert.equal(anchorMiss(a, episode(say(text))), undefined, `${text}: ${JSON.stringify(a.facts)}`);
  }
  assert.deepEqual(goldAnchorOf({ gold: [say('Down -5% to $1,234.50.')], instance: '{}' })!.facts, [-5, 1234.5]);
});

test('gold anchor: a view that is not one anchors nothing, and a deep instance is read without recursion', () => {
  let args: unknown = 1;
  for (let i = 0; i < 100_000; i++) args = { a: args };
  const deepCall = {
    type: 'tool_call' as const,
    call: { id: 'g', type: 'function' as const, function: { name: 'f', arguments: JSON.stringify({ a: 1 }) } },
  };
  const deepGold = goldAnchorOf({ gold: [deepCall], instance: '{}' })!;
  deepGold.calls[0].args = args as Record<string, unknown>;
  assert.equal(anchorMiss(deepGold, episode(deepCall))?.part, 'calls'); // past MAX_ARG_DEPTH: no match, no stack overflow
  assert.equal(goldAnchorOf(null), undefined);
  assert.equal(goldAnchorOf({ gold: 'x' }), undefined);
  assert.equal(goldAnchorOf({ gold: [] }), undefined);
  // Gold's words past 64 KiB are no answer (rerun 38 padded them to 1 MiB to load the worker).
  assert.equal(goldAnchorOf({ gold: [say('x'.repeat(64 * 1024 + 1))] }), undefined);
  const leaves = JSON.stringify({ data: Array.from({ length: 40_000 }, (_, i) => `value ${i}`) });
  const many = goldAnchorOf({
    gold: [say(`It is value 7 and value 39999. ${'pad '.repeat(15_000)}`)],
    instance: leaves,
  })!;
  assert.ok(many.facts.includes('value 7') && many.facts.includes('value 39999'));
  // Long values that open as gold's words do are looked for whole, up to a bound; past it, no anchor.
  const longs = JSON.stringify(Array.from({ length: 2_000 }, (_, i) => `it is value seven ${i}`));
  assert.equal(goldAnchorOf({ gold: [say('It is value seven 12.')], instance: longs }), undefined);
  assert.equal(goldAnchorOf({ gold: [{ type: 'tool_call' }] }), undefined);
  const loose = { type: 'tool_call', call: { id: 'g', type: 'function', function: { name: 'f', arguments: '[1]' } } };
  assert.equal(goldAnchorOf({ gold: [loose] }), undefined); // arguments that are no object would match any call of f
  let deep = '"deepvalue"';
  for (let i = 0; i < 100_000; i++) deep = `[${deep}]`;
  const a = goldAnchorOf({ gold: [say('The deepvalue is here.')], instance: deep })!;
  assert.deepEqual(a.facts, ['deepvalue']);
});
