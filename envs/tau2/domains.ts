import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { airlineTools, FlightDB } from './airline.js';
import type { ModelType } from './model.js';
import { parseOrderedJson } from './ordered-json.js';
import { retailTools, RetailDB } from './retail.js';
import { Tau2Db, type ToolDef } from './toolkit.js';

/** The three tau2 domains: data location, DB model, toolkit, and the process-wide DB cache. */
export type Tau2DomainName = 'airline' | 'retail' | 'mock';

export interface Tau2Domain {
  name: Tau2DomainName;
  /** Python class name of the toolkit, used in TypeErrors (e.g. `AirlineTools.book_reservation()`). */
  toolkitName: string;
  dbType: ModelType;
  tools: ToolDef<Tau2Db>[];
}

export const DATA_DIR = fileURLToPath(new URL('../../data/tau2/', import.meta.url));

const registry = new Map<Tau2DomainName, () => Promise<Tau2Domain>>([
  ['airline', async () => ({ name: 'airline', toolkitName: 'AirlineTools', dbType: FlightDB, tools: airlineTools })],
  ['retail', async () => ({ name: 'retail', toolkitName: 'RetailTools', dbType: RetailDB, tools: retailTools })],
]);

export function registerDomain(name: Tau2DomainName, load: () => Promise<Tau2Domain>): void {
  registry.set(name, load);
}

export async function getDomain(name: Tau2DomainName): Promise<Tau2Domain> {
  const load = registry.get(name);
  if (!load) throw new Error(`unknown tau2 domain: ${name}`);
  return load();
}

export function readDataFile(domain: string, file: string): string {
  return readFileSync(`${DATA_DIR}${domain}/${file}`, 'utf8');
}

const dbCache = new Map<string, Tau2Db>();

/** The domain's initial DB, parsed once per process; callers get a cheap copy-on-write fork. */
export function initialDb(domain: Tau2Domain, file = 'db.json'): Tau2Db {
  const key = `${domain.name}/${file}`;
  let db = dbCache.get(key);
  if (!db) {
    db = loadDb(domain.dbType, domain.name, file);
    dbCache.set(key, db);
  }
  return db.fork();
}

export function loadDb(type: ModelType, domain: string, file: string): Tau2Db {
  return Tau2Db.load(type, parseOrderedJson(readDataFile(domain, file), `data/tau2/${domain}/${file}`));
}
