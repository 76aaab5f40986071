import { createStage1Activities } from '../../activities/stage1.js';

/**
 * Runs one stage 1 activity in its own process, so a test can kill -9 it mid-way like a lost
 * worker: `node --import tsx test/helpers/stage1-child.ts <activityName> <input JSON>`.
 */
const [name, input] = process.argv.slice(2);
const acts = createStage1Activities() as unknown as Record<string, (i: unknown) => Promise<unknown>>;
const out = await acts[name](JSON.parse(input));
process.stdout.write(JSON.stringify(out));
