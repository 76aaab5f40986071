import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Message } from '../core/messages.js';
import { actionMessage, type AgentAction } from '../envs/environment.js';
import { anchorMiss, goldAnchorOf, termsOf } from '../envs/gold-anchor.js';
import { call, say } from '../envs/sdk/index.js';
import { cpuMicros, growth } from './helpers/growth.js';

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
/** Gold `words` over stored values: `right` is paid, and neither the count alone nor `wrong` is. */
function judge(words: string, stored: readonly string[], right: string, wrong: string) {
  const a = anchorOf(words, { v: stored });
  assert.ok(pays(a, right), `${right}: ${JSON.stringify(a.facts)}`);
  for (const no of ['You have 4 orders.', wrong]) assert.ok(!pays(a, no), `${no}: ${JSON.stringify(a.facts)}`);
}

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

test('gold anchor: a code that is also a word holds with its word of meaning; a name keeps its final "s"; a name that is a month is no date; Chinese names (reruns 44, 47)', () => {
  // An ambiguous code gold says after function words only, or first: those words go with it.
  for (const [words, stored, right, wrong] of [
    [
      'Of your 4 orders, the most expensive one ships to OK.',
      ['OK', 'TX'],
      'It ships to OK (4 orders).',
      'OK: of your 4 orders, the most expensive one ships to TX.',
    ],
    [
      'Of your 4 orders, the most expensive one got an A.',
      ['A', 'C'],
      'It got an A, of 4.',
      'A quick look: of your 4 orders, the most expensive one got a C.',
    ],
    [
      'A is the grade of the most expensive of your 4 orders.',
      ['A', 'C'],
      'Of 4, A is the grade.',
      'C is the grade of the most expensive of your 4 orders. A pity.',
    ],
  ] as const)
    judge(words, stored, right, wrong);
  // "Lucas" is not "Luca", nor "Frances" "France", either way round; a plural is still its singular.
  for (const [said, other] of [
    ['Lucas', 'Luca'],
    ['Luca', 'Lucas'],
    ['Frances', 'France'],
  ]) {
    const a = anchorOf(`Of your 4 orders, the most expensive one was for ${said}.`, { r: [said, other] });
    assert.ok(pays(a, `For ${said}, of 4.`), said);
    assert.ok(!pays(a, `Of your 4 orders, the most expensive one was for ${other}.`), `${other} for ${said}`);
  }
  assert.ok(
    pays(anchorOf('Of your 4 orders, the most expensive is one of the laptops.', { k: 'laptop' }), 'Laptops: 1 of 4.'),
  );
  // A name that is a month is the name: a date in that month, or the month in full, is not it.
  for (const [words, stored, wrong] of [
    [
      'Of your 4 orders, June got the most expensive one.',
      ['June Park', 'Omar Diaz'],
      'Of your 4 orders, Omar got the most expensive one (on 2024-06-15).',
    ],
    [
      'Of your 4 orders, Jan got the most expensive one.',
      ['Jan Novak', 'Omar Diaz'],
      'Of your 4 orders, Omar got the most expensive one in January.',
    ],
  ] as const) {
    const a = anchorOf(words, { r: stored });
    assert.ok(pays(a, words), words);
    assert.ok(!pays(a, wrong), `${wrong}: ${JSON.stringify(a.facts)}`);
  }
  // The answer, not the word: an "I" or "A" that opens gold, or "No problem", is no tier I, grade
  // A or gift wrap No, with a word of meaning before it or not (rerun 47 paid gold's template with
  // a wrong tier); a sign between the code and its word is none ("grade — A").
  for (const [words, stored, wrong, right] of [
    [
      'I checked your 4 orders: the most expensive one is in tier I.',
      ['I', 'II', 'III'],
      'I checked your 4 orders: the most expensive one is in tier III.',
      'Of 4, the priciest is tier I.',
    ],
    [
      'Hi Ada, I checked your 4 orders: the most expensive one is tier I.',
      ['I', 'II'],
      'Hi Ada, I checked your 4 orders: the most expensive one is tier II.',
      'Tier I, of 4.',
    ],
    [
      'A quick summary: of your 4 orders, the most expensive one got grade A.',
      ['A', 'B', 'C'],
      'A quick summary: of your 4 orders, the most expensive one got grade C.',
      'Of 4, the priciest got grade A.',
    ],
    [
      'No problem! Of your 4 orders, the most expensive one has gift wrap: No.',
      ['No', 'Yes'],
      'No problem! Of your 4 orders, the most expensive one has gift wrap: Yes.',
      'Of 4, the priciest has gift wrap: No.',
    ],
    [
      'Of your 4 orders, the most expensive one: grade — A.',
      ['A', 'B', 'C'],
      'Of your 4 orders, the most expensive one: grade — C.',
      'Grade: A (4 orders).',
    ],
  ] as const)
    judge(words, stored, right, wrong);
  // A value merely written capitalized is no name: "electronics" is `Electronics` (rerun 47).
  for (const [words, stored, wrong, right] of [
    [
      'Of your 4 orders, the most expensive one is in the electronics category.',
      ['Electronics', 'Toys'],
      'Of your 4 orders, the most expensive one is in the toys category.',
      'Electronic, of 4.',
    ],
    [
      'You spent the most on sports: $540 over your 4 orders.',
      ['Sports', 'Toys'],
      'You spent the most on toys: $540 over your 4 orders.',
      'SPORTS: $540 of 4 orders.',
    ],
    [
      'Of your 4 orders, your top category is Books.',
      ['Books', 'Toys'],
      'Of your 4 orders, your top category is Toys.',
      'books (4 orders)',
    ],
  ] as const)
    judge(words, stored, right, wrong);
  // A code inside a noun phrase: a pronoun "I" after the wrong tier is none (rerun 48).
  for (const [words, wrong, right] of [
    [
      'Your account is on the Tier I plan, of 4.',
      'Your account is on the Tier II plan, and I can upgrade it. You have 4 orders.',
      'You are on Tier I (4 orders).',
    ],
    [
      'Your order qualifies for tier I shipping, 4 of them.',
      'Your 4 orders qualify for tier III shipping, which I have applied.',
      'Tier I shipping for all 4.',
    ],
  ] as const)
    judge(words, ['I', 'II', 'III'], right, wrong);
  // A number, a "Yes" or a line break between gold's word and a pronoun is no tier (rerun 49).
  for (const [words, stored, wrong, right] of [
    [
      'Your account is at Level I, of 4 orders.',
      ['I', 'II'],
      'Your account is at Level 2 so I can offer an upgrade on 4 orders.',
      'Level I (4 orders).',
    ],
    [
      'Your most expensive of 4 orders is tier I.',
      ['I', 'II'],
      'Of your 4 orders, the most expensive:\n- Tier: 2\nI can upgrade it.',
      'Of 4: tier I.',
    ],
    [
      'Of your 4 orders, the priciest has gift wrap: No.',
      ['No', 'Yes'],
      'Of your 4 orders, the priciest has gift wrap: Yes\nNo other add-ons.',
      'Gift wrap: No (4 orders).',
    ],
    // A symbol or a capitalized function word between gold's word and the code is a word of its
    // own (rerun 50: "gift wrap: ✅ (No extra charge)", "status is Out (In the office…").
    [
      'Order 1042 has gift wrap: No.',
      ['No', 'Yes'],
      'Order 1042 has gift wrap: ✅ (No extra charge)',
      'Order 1042, gift wrap: No.',
    ],
    [
      'Alice Ito has 4 orders; her status is In.',
      ['In', 'Out'],
      'Alice Ito has 4 orders; her status is Out (In the office again on Monday).',
      'Alice Ito (4 orders) has status: In.',
    ],
    // Any sign alone but a joining one is a word too; gold's own signs beside its code are kept; a
    // label of capitalized words is no value (rerun 51).
    [
      'Member M7 of 4 is at tier I.',
      ['I', 'II'],
      'Member M7 of 4 is at tier ? I could not find one on file.',
      'Member M7 (of 4): tier I.',
    ],
    [
      'Order 1042 of 4:\n- Gift wrap: ❌ No',
      ['No', 'Yes'],
      'Order 1042 of 4:\n- Gift wrap: ✅ Yes\n- Express: ❌ No',
      'Order 1042 of 4 has gift wrap: No.',
    ],
    [
      'Order 1042 of 4 ships to OK.',
      ['OK', 'TX'],
      'Order 1042 of 4 ships to TX. Bill To: OK',
      'Order 1042 of 4 — Ship To: OK',
    ],
    // Rerun 52: a capitalized word after a label's colon is its value, not more label.
    [
      'Alice Ito has 4 orders; her status is In.',
      ['In', 'Out'],
      'Alice Ito (4 orders)\nStatus: Out (In the office again on Monday)',
      'Alice Ito has 4 orders. Status: In',
    ],
    [
      'Alice Ito has 4 orders; her status is In.',
      ['In', 'Out'],
      'Alice Ito: 4 orders. Status: Out — In on Monday.',
      'Alice Ito: 4 orders, status In.',
    ],
    // Rerun 53: a label is capitalized words with no sign between them; a colon after a value ends none.
    [
      'Alice Ito has 4 orders; her status is In.',
      ['In', 'Out'],
      'Alice Ito has 4 orders; her status is Out: In the office on Monday.',
      'Alice Ito (4 orders) — Status — In',
    ],
    [
      'Order 1042 of 4 ships to OK.',
      ['OK', 'TX'],
      'Order 1042 of 4 ships to TX.',
      'Order 1042 of 4:\n| Ship To | OK |',
    ],
    ['Order 1042 of 4 — Ship To — OK', ['OK', 'TX'], 'Order 1042 of 4 ships to TX.', 'Order 1042 of 4 ships to OK.'],
    // A hyphenated label by its word of meaning (rerun 54).
    ['Order 1042 of 4 ships to OK.', ['OK', 'TX'], 'Order 1042 of 4 — Bill-To: OK', 'Order 1042 of 4 — Ship-To: OK'],
    // A label's "-To" only points; any other first word may turn the meaning (rerun 55).
    ['Order 1042 of 4 ships to OK.', ['OK', 'TX'], 'Order 1042 of 4 — Drop-Ship: OK', 'Order 1042 of 4 ships to OK.'],
    ['Room 1042 of 4: smoking: No.', ['Yes', 'No'], 'Room 1042 of 4: Non-Smoking: No', 'Room 1042 of 4: smoking: No'],
    // A dingbat arrow joins; an emoji's presentation selector is no part of its sign.
    [
      'Order 1042 of 4: gift wrap ✔️ Yes',
      ['Yes', 'No'],
      'Order 1042 of 4: gift wrap ✔️ No',
      'Order 1042 of 4: gift wrap ✔ Yes',
    ],
    [
      'Order 1042 of 4 has gift wrap: No.',
      ['No', 'Yes'],
      'Order 1042 of 4: express ➜ No',
      'Order 1042 of 4: gift wrap ➡️ No',
    ],
  ] as const)
    judge(words, stored, right, wrong);
  // A month said by name: gold, the dates stored, honest replies paid, wrong ones capped. Any
  // capitalized month is one wherever it stands (rerun 52: opening a sentence or a line, or after
  // a comma, it had left gold's facts); "May" asks or wishes before a subject unless a date's word
  // comes before it, and is the month before anything else (reruns 51, 53–55).
  const march = ['2024-03-05', '2024-04-05', '2024-05-05'];
  const may = ['2024-05-05', '2024-06-05'];
  const june = 'Your largest bill was in June: $120.';
  for (const [gold, dates, honest, wrong] of [
    ['Your subscription renews on May 15.', may, [], ['It renews on June 15. May I help you with anything else?']],
    [
      'March was your most expensive month: $120.',
      march,
      ['Most expensive:\n- March: $120', 'Your bill of $120, placed on Tuesday, March the 5th.'],
      ['April was your most expensive month: $120.'],
    ],
    [
      'Your order was placed in March.',
      march,
      [
        'Which month was it placed? March.',
        'Your order was placed on Tuesday, March the 5th.',
        'It came in mid-March.',
      ],
      ['Your order was placed in April; the next is due pre-March.'],
    ],
    [
      'Your bills over $100:\n- March\n- April',
      march,
      [],
      ['Your bills over $100:\n- May\n- June', 'Your bills over $100: April and May.'],
    ],
    [
      'Your largest bill was in May: $120.',
      may,
      [
        'Your largest bill was in May. It came to $120.',
        'In May you spent $120, your largest bill.',
        'Your May bill was the largest: $120.',
        'May saw your highest spending: $120.',
        'Your largest bill ($120) came in mid-May.',
        'Your largest bill ($120) came in mid\u2011May.',
        'Between April and May you spent $120 on your largest bill.',
        'Throughout May you spent $120, your largest bill.',
        'May vs June: $120 vs $80.',
        'May thru July were busy; your largest bill, $120.',
        'May v. June: $120 vs $80.',
        'Largest bill: May not June, at $120.',
        'Your largest bill was May, at $120.',
        'May saw your largest bill: $120.',
        'May of last year had your largest bill: $120.',
      ],
      [
        `${june} May the rest of your month go well!`,
        `${june} MAY I HELP WITH ANYTHING ELSE?`,
        `${june} May every month be cheaper!`,
        `${june} Thanks, and May you save more!`,
        `${june} Is there anything else, or May I close this?`,
        `${june} May peace be with you!`,
        `${june} May guests bring pets? Yes.`,
        // Mid-sentence before a bare verb, and "may" beside it, ask (rerun 59).
        `${june} Refunds May be delayed.`,
        `${june} You May need to refresh.`,
        `${june}\n- May or may not include pending charges`,
        `${june}\n- May expire.`,
        `${june} Will it post today? They May not. June is busy.`,
        // Read from less than a date's words, a modal "May" was the month (reruns 59, 61).
        `${june}\nGift cards:\n- May expire\n- Cannot be refunded`,
        `${june}\nNote: May instead appear as a pending charge.`,
        `${june}\n- May again be delayed`,
        `${june}\n- May hit your account in 3 days`,
        `${june}\n- May cost extra`,
        `${june}\n- May appear delayed`,
        `${june} ALL SALES FINAL EXCEPT AS MAY BE REQUIRED BY LAW.`,
        `${june} Taxes and Fees as May Apply; Fees Are Lower Than May Appear.`,
        `${june} Your card was charged in June, then May be refunded within 5 days.`,
        `${june} Ask Jan. Then May follow up.`,
        `${june} Please note this May appear as two charges.`,
        // Caps, Title Case, a comma, emphasis, "you may." (rerun 62).
        `${june} ORDERS OVER $50 MAY QUALIFY FOR FREE SHIPPING.`,
        `${june}\n- May, in rare cases, take longer to post.`,
        `${june} Fees *May* apply.`,
        `${june} YES, YOU MAY. Come What May, we will fix it.`,
        `${june} Protesters May Not March Here. What Your Total Is May Surprise You.`,
      ],
    ],
    // Gold's "May" before a bare verb with a date's word beside it is the month (rerun 62).
    [
      'Your charges since May have totaled $120.',
      may,
      ['In May your charges came to $120.', 'Your charges since May have totaled $120.'],
      ['Your charges since June have totaled $120.'],
    ],
    [
      'Busy months like May need a budget: you spent $120.',
      may,
      [],
      ['Busy months like June need a budget: you spent $120.'],
    ],
    // Gold that opens with "May" and a heading keeps its month (rerun 60: any month was paid).
    ['Biggest bill? May again, at $120.', may, [], ['Your largest bill was in June, at $120.']],
    ['Your highest month: May too.\nTotal: $120', may, [], ['Your highest month: June too.\nTotal: $120']],
    ['Largest bill: May not June, at $120.', may, [], ['Largest bill: June, at $120.']],
    ['Your biggest month was May not counting refunds, at $120.', may, [], ['Your biggest month was June, at $120.']],
    [
      'May of 2024 was your biggest month, at $120.',
      may,
      ['Your biggest month was May 2024: $120.'],
      ['April of 2024 was your biggest month, at $120.'],
    ],
    ['Your largest bill was in May. It came to $120.', may, [], ['Your largest bill was in June. It came to $120.']],
    ['Your May bill was your largest: $120.', may, [], ['Your June bill was your largest: $120.']],
    [
      'Your biggest months were April and May, at $120 and $80.',
      ['2024-04-05', ...may],
      [
        'April & May were the biggest: $120 and $80.',
        'It was April and May not June: $120 and $80.',
        'Top: April and May\u2026 they hit $120 and $80.',
      ],
      ['Your biggest months were April and June, at $120 and $80. Also May include pending charges.'],
    ],
    [
      'Your biggest months were May and June, at $120 and $80.',
      may,
      ['May and June were the biggest: $120 and $80.', 'May tops the list at $120, then June at $80.'],
      [],
    ],
    [
      'In April and May your bills were $120 each.',
      ['2024-04-05', ...may],
      [],
      ['In April and June your bills were $120 each.'],
    ],
    ['Your biggest month? May. It came to $120.', may, [], ['Your biggest month? June. It came to $120.']],
    [
      'Your refund posted in May.',
      may,
      [
        'Your refund posted by end-of-May.',
        'May is when your refund posted.',
        'Your refund posted in May\u2014on the 14th.',
      ],
      [
        'Your refund posted in June.\n- May be delayed by your bank.',
        'Your refund posted in June. \u{1f64f} May peace be with you!',
        'Your refund posted in June. May need a day to appear.',
      ],
    ],
    [
      'Your refund of $120 posts on May 5.',
      may,
      [
        'Your $120 refund posts on\nMay the 5th.',
        "May's the month: your $120 refund posts on the 5th.",
        'Refund of $120:\nMay — your bank shows it on the 5th.',
        'When does the $120 refund post? May. It posts on the 5th.',
      ],
      [
        'Your refund of $120 posts on June 5. 😊 May I help with anything else?',
        'Your refund of $120 posts on June 5.\n1) May I suggest checking your bank?',
        'Your refund of $120 posts on June 5. May a colleague follow up?',
      ],
    ],
  ] as const) {
    const a = anchorOf(gold, { p: dates });
    for (const reply of honest) assert.ok(pays(a, reply), `${gold} → ${reply}`);
    for (const reply of wrong) assert.ok(!pays(a, reply), `${gold} → ${reply}`);
  }
  // A reply says "May" with a date's words beside it; where those beside it would fit a modal too,
  // an honest reply is capped unless gold said "May" with the same word after it: each rule that
  // read the month from less paid a modal "May" in the next pass (reruns 57–61).
  const inMay = anchorOf('Your largest bill was in May: $120.', { p: may });
  for (const reply of [
    'May spending peaked: $120.',
    'Biggest bill? May again, at $120.',
    '## May spending\nLargest bill: $120',
    'Months like May have your largest bills: $120.',
  ])
    assert.ok(!pays(inMay, reply), reply);
  const again = anchorOf('Biggest bill? May again, at $120.', { p: may });
  for (const reply of ['Biggest bill? May again, at $120.', 'In May you spent $120, your biggest bill.'])
    assert.ok(pays(again, reply), reply);
  assert.ok(!pays(again, 'Biggest bill? June again, at $120.'), 'June again');
  // "may apply" is no May.
  assert.ok(pays(anchorOf('A late fee of $15 may apply.', { due: '2024-05' }), 'A $15 late fee could apply.'));
  // A number with its ordinal or unit written on is the number; a minus before a currency sign
  // is a minus (rerun 56).
  assert.ok(pays(anchorOf('Your refund posts on March 5th.', { at: '2024-03-05' }), 'Your refund posts on March 5.'));
  // A unit stays on its number (rerun 57: read as the number, "3pm" was paid by "3am").
  for (const [words, wrong] of [
    ['Pickup is at 3pm.', 'Pickup is at 3am.'],
    ['Your seat is 12D.', 'Your seat is 12A.'],
    ['Your parcel weighs 2.5kg.', 'Parcel 2 \u2014 5kg.'],
  ])
    assert.ok(!pays(anchorOf(words, {}), wrong), wrong);
  // A discount line writes its amount with a minus (rerun 57).
  assert.ok(
    pays(
      anchorOf('You saved $5.00 with the coupon; total $20.00.', {}),
      'Subtotal: $25.00\nCoupon: -$5.00\nTotal: $20.00',
    ),
    'coupon',
  );
  assert.ok(!pays(anchorOf('Your balance is -$20.00.', {}), 'Your balance is $20.00 in credit.'));
  assert.ok(pays(anchorOf('Your balance is -20.00 USD.', {}), 'Your balance is \u2212$20.00.'));
  // A time with an offset is a date (rerun 49: Python's isoformat() writes "+00:00").
  const placed = anchorOf('Your order was placed in March.', {
    at: '2024-03-05T10:00:00+00:00',
    other: '2024-04-02 10:00:00 UTC',
  });
  assert.ok(pays(placed, 'Placed in March.'));
  assert.ok(!pays(placed, 'Your order was placed in April.'));
  // An id holding a date, or any number and two digits, says no month.
  const shipped = anchorOf('Your order ORD-2024-03-118 shipped in March.', {
    id: 'ORD-2024-03-118',
    at: '2024-03-20',
    other: '2024-04-02',
  });
  assert.ok(!pays(shipped, 'Your order ORD-2024-03-118 shipped in April.'));
  assert.ok(
    !pays(
      anchorOf('Your order shipped in November.', { at: '2024-11-03', other: '2024-10-03' }),
      'Your order (ref 7781-11) shipped in October.',
    ),
  );
  // A month as ISO writes it ("2024-03") is said by its name.
  const month = anchorOf('Of your 4 bills, the largest was for March 2024.', { p: ['2024-03', '2024-04'] });
  assert.ok(pays(month, 'The largest of 4: 2024-03.'));
  assert.ok(!pays(month, 'Of your 4 bills, the largest was for April 2024.'));
  // A Chinese given name of two characters, said without the family name.
  const han = anchorOf('Of your 4 orders, the most expensive one is for 小明.', { r: ['王 小明', '李 华强'] });
  assert.ok(pays(han, 'For 小明, of 4.'));
  for (const no of ['You have 4 orders.', 'Of your 4 orders, the most expensive one is for 华强.'])
    assert.ok(!pays(han, no), no);
  // Stored as Chinese writes it, without a space, and said in a sentence without spaces (rerun 47).
  for (const [words, wrong] of [
    [
      'Of your 4 orders, the most expensive one was for 小明.',
      'Of your 4 orders, the most expensive one was for 小红.',
    ],
    ['最贵的订单是王小明的。', '最贵的订单是李小红的。'],
    // Characters, not UTF-16 units (rerun 50).
    ['注文者は𠮷田太郎様です。', '注文者は𠮷田花子様です。'],
    // Four characters: either half, a two-character surname (rerun 48).
    ['Of your 4 orders, the most expensive one is for 太郎.', 'Of your 4 orders, the most expensive one is for 花子.'],
    ['Of your 4 orders, the most expensive one is for 娜娜.', 'Of your 4 orders, the most expensive one is for 小明.'],
  ] as const) {
    const a = anchorOf(words, { r: ['王小明', '李小红', '山田太郎', '佐藤花子', '欧阳娜娜', '𠮷田太郎', '𠮷田花子'] });
    assert.ok(pays(a, words), words);
    assert.ok(!pays(a, wrong), wrong);
  }
});

test('gold anchor: punctuation around a word is stripped in time linear in it (rerun 41: a 64 KiB run of dashes held the worker 67 s)', async () => {
  // Sixteen times the dashes cost about sixteen times, not 256.
  const { ratio, said } = await growth(
    (n) => goldAnchorOf({ gold: [say(`x${'\u2014'.repeat(n)}y`)], instance: '{}' }),
    2000,
    16,
  );
  assert.ok(ratio < 48, `one word of dashes: ${said}`);
});

test('gold anchor: a gold of many weak "May"s over many May dates is read in linear time (rerun 62: 14.9 s for 6 500 over 40 000)', async () => {
  const cost = (n: number) =>
    goldAnchorOf({
      gold: [say(Array.from({ length: n }, (_, i) => `May x${i}`).join(' '))],
      instance: JSON.stringify({ d: Array.from({ length: 8 * n }, (_, i) => `2024-05-01T${i}`) }),
    });
  // Within gold's 64 KiB of words: 400 to 6 400 weak "May"s, eight May dates each.
  const { ratio, said } = await growth(cost, 400, 16);
  assert.ok(ratio < 48, `weak Mays over May dates: ${said}`);
});

test('gold anchor: a long reply is read once for Han names, however many (reruns 49, 50: a search per name took 9 s on 1 MiB)', async () => {
  const names = Array.from({ length: 1100 }, (_, i) => String.fromCharCode(0x4e00 + i, 0x5e00 + i));
  const han = anchorOf(names.join('、'), { r: names });
  assert.equal(han.facts.length, 1100);
  const plain = anchorOf('Your order is shipped.', { s: 'shipped' });
  const reply = episode(say(`${names.join('、')} ${'\u4e00'.repeat(200_000)}`));
  assert.equal(anchorMiss(han, reply), undefined);
  anchorMiss(plain, reply); // warm up the JIT
  const [named, words] = [
    await cpuMicros(() => anchorMiss(han, reply)),
    await cpuMicros(() => anchorMiss(plain, reply)),
  ];
  assert.ok(named < 50 * Math.max(words, 1000), `${named} µs for 1 100 Han names, ${words} µs for one word`);
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

test("gold anchor: comparing gold's calls with an episode's is bounded (rerun 64b: 60 calls of 20 000 values took 1 s an episode, 8 s of the worker's loop for two seeds of check 5)", () => {
  // Calls unlike each other only in an array's last value: each failed comparison walks it whole.
  const calls = (extra?: number) =>
    Array.from({ length: 60 }, (_, i) =>
      call('t', { a: [...Array.from({ length: 2000 }, () => ({})), { k: i }], ...(extra ? { extra } : {}) }),
    );
  const a = goldAnchorOf({ gold: calls(), instance: '{}' })!;
  // Each call held by one made with a key more, the last first: each gold call walks the others.
  assert.deepEqual(anchorMiss(a, episode(...calls(1).reverse())), {
    part: 'calls',
    what: "gold's calls take more than 250000 values to compare",
  });
  // Calls made as gold makes them are taken whole, in any order (rerun 62: 60 invoices of 30
  // line items in reverse order had spent the budget).
  assert.equal(anchorMiss(a, episode(...calls().reverse())), undefined);
  const items = Array.from({ length: 30 }, (_, k) => ({ sku: `SKU-${k}`, qty: 1, price: 9.99 }));
  const invoices = Array.from({ length: 60 }, (_, i) => call('send_invoice', { items, customer: `C-${i}` }));
  const billing = goldAnchorOf({ gold: invoices, instance: '{}' })!;
  assert.equal(anchorMiss(billing, episode(...[...invoices].reverse())), undefined);
});

test('gold anchor: a view that is not one anchors nothing, and a deep instance is read without recursion', () => {
  const deepArgs = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
  const deepCall = {
    type: 'tool_call' as const,
    call: { id: 'g', type: 'function' as const, function: { name: 'f', arguments: deepArgs } },
  };
  const deepGold = goldAnchorOf({ gold: [deepCall], instance: '{}' })!;
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
  // Gold's call is shown cut, its name too (rerun 50b: 3 MB of name in every capped reward's details).
  const named = goldAnchorOf({ gold: [call('f'.repeat(300_000), {})], instance: '{}' })!;
  assert.ok(anchorMiss(named, episode(say('hi')))!.what.length < 1000);
  const loose = { type: 'tool_call', call: { id: 'g', type: 'function', function: { name: 'f', arguments: '[1]' } } };
  assert.equal(goldAnchorOf({ gold: [loose] }), undefined); // arguments that are no object would match any call of f
  let deep = '"deepvalue"';
  for (let i = 0; i < 100_000; i++) deep = `[${deep}]`;
  const a = goldAnchorOf({ gold: [say('The deepvalue is here.')], instance: deep })!;
  assert.deepEqual(a.facts, ['deepvalue']);
});

test("gold anchor: gold's arguments past the values an episode is compared on anchor nothing, and are made canonical once a seed (rerun 86a: 1.3 M empty objects, 250-520 ms at every evaluate)", () => {
  assert.equal(
    goldAnchorOf({ gold: [call('f', { xs: Array.from({ length: 300_000 }, () => ({})) })], instance: '{}' }),
    undefined,
  );
  const honest = goldAnchorOf({
    gold: [call('f', { xs: Array.from({ length: 1_000 }, (_, i) => i) })],
    instance: '{}',
  })!;
  assert.equal(honest.canon.length, 1);
  assert.equal(anchorMiss(honest, episode(call('f', { xs: Array.from({ length: 1_000 }, (_, i) => i) }))), undefined);
});

test("gold anchor: each comparison with a call of gold's tool spends gold's whole size, so wide arguments end in the budget, not in a walk per call (rerun 87a: 200 000 keys, 8 calls, 1.5 s an evaluate)", () => {
  const wide = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, i]));
  const anchor = goldAnchorOf({ gold: [call('f', wide)], instance: '{}' })!;
  assert.equal(anchor.values[0], 200_001);
  const calls = Array.from({ length: 8 }, (_, i) => call('f', { k0: -i }));
  assert.match(anchorMiss(anchor, episode(...calls))?.what ?? '', /more than 250000 values to compare/);
});
