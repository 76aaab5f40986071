import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ToolSchema } from '../../core/messages.js';
import { airlineTools, FlightDB } from './airline.js';
import { MockDB, mockFunctions, mockTools, MockUserDB, mockUserFunctions, mockUserTools } from './mock.js';
import type { ModelType, Obj } from './model.js';
import { parseOrderedJson } from './ordered-json.js';
import { retailTools, RetailDB } from './retail.js';
import { Tau2Db, type ToolDef } from './toolkit.js';

/** The three tau2 domains: data location, DB models, toolkits, and the process-wide DB cache. */
export type Tau2DomainName = 'airline' | 'retail' | 'mock';
export const TAU2_DOMAINS: Tau2DomainName[] = ['airline', 'retail', 'mock'];

/** One side's toolkit (the agent's, or the simulated user's in mock). */
export interface Toolkit {
  /** Python class name, used in TypeErrors (e.g. `AirlineTools.book_reservation()`). */
  className: string;
  dbType: ModelType;
  dbFile: string;
  tools: ToolDef<Tau2Db>[];
  /** Non-tool methods reachable from initialization_actions and env_assertions. */
  functions: Record<string, (db: Tau2Db, a: Obj) => unknown>;
}

export interface Tau2Domain {
  name: Tau2DomainName;
  agent: Toolkit;
  user?: Toolkit;
}

export const DATA_DIR = fileURLToPath(new URL('../../data/tau2/', import.meta.url));

const DOMAINS: Record<Tau2DomainName, Tau2Domain> = {
  airline: {
    name: 'airline',
    agent: { className: 'AirlineTools', dbType: FlightDB, dbFile: 'db.json', tools: airlineTools, functions: {} },
  },
  retail: {
    name: 'retail',
    agent: { className: 'RetailTools', dbType: RetailDB, dbFile: 'db.json', tools: retailTools, functions: {} },
  },
  mock: {
    name: 'mock',
    agent: { className: 'MockTools', dbType: MockDB, dbFile: 'db.json', tools: mockTools, functions: mockFunctions },
    user: {
      className: 'MockUserTools',
      dbType: MockUserDB,
      dbFile: 'user_db.json',
      tools: mockUserTools,
      functions: mockUserFunctions,
    },
  },
};

export function getDomain(name: string): Tau2Domain {
  const d = DOMAINS[name as Tau2DomainName];
  if (!d) throw new Error(`unknown tau2 domain '${name}' (known: ${TAU2_DOMAINS.join(', ')})`);
  return d;
}

export function readDataFile(domain: string, file: string): string {
  return readFileSync(`${DATA_DIR}${domain}/${file}`, 'utf8');
}

export function readDataJson<T>(domain: string, file: string): T {
  return JSON.parse(readDataFile(domain, file)) as T;
}

/** The agent's tools exactly as tau2 shows them to the LLM (generated from upstream). */
export function toolSchemas(domain: string, side: 'agent' | 'user' = 'agent'): ToolSchema[] {
  return readDataJson<ToolSchema[]>(
    domain,
    side === 'agent' ? 'derived/tools_openai_schema.json' : 'derived/user_tools_openai_schema.json',
  );
}

const dbCache = new Map<string, Tau2Db>();

/** A toolkit's initial DB, parsed once per process; each caller gets a cheap copy-on-write fork. */
export function initialDb(domain: Tau2DomainName, kit: Toolkit): Tau2Db {
  const key = `${domain}/${kit.dbFile}`;
  let db = dbCache.get(key);
  if (!db) {
    db = loadDb(kit.dbType, domain, kit.dbFile);
    dbCache.set(key, db);
  }
  return db.fork();
}

/** Parses a DB file from scratch (the naive path that the cache avoids). */
export function loadDb(type: ModelType, domain: string, file: string): Tau2Db {
  return Tau2Db.load(type, parseOrderedJson(readDataFile(domain, file), `data/tau2/${domain}/${file}`));
}
