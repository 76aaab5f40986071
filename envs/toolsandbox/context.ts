/**
 * ToolSandbox's world state: five databases whose whole history is kept as snapshots keyed by
 * `sandbox_message_index` (tool_sandbox/common/execution_context.py, ExecutionContext). A change
 * made while a message is being processed lands in the snapshot of the next message index; every
 * database starts with an all-null "headguard" row at index 0 so that an empty snapshot exists.
 * Derived from apple/ToolSandbox (Copyright (C) 2024 Apple Inc.; licence in data/toolsandbox/LICENSE).
 */
import { randomUUID } from 'node:crypto';

export const NAMESPACES = ['SANDBOX', 'SETTING', 'CONTACT', 'MESSAGING', 'REMINDER'] as const;
export type Namespace = (typeof NAMESPACES)[number];
export type Row = Record<string, unknown>;

/** Column order of each database (ExecutionContext.dbs_schemas); floats are the Float64 columns. */
export const SCHEMAS: Record<Namespace, { columns: string[]; floats: string[] }> = {
  SANDBOX: {
    columns: [
      'sandbox_message_index',
      'sender',
      'recipient',
      'content',
      'openai_tool_call_id',
      'openai_function_name',
      'conversation_active',
      'tool_call_exception',
      'tool_trace',
      'visible_to',
    ],
    floats: [],
  },
  SETTING: {
    columns: [
      'sandbox_message_index',
      'device_id',
      'cellular',
      'wifi',
      'location_service',
      'low_battery_mode',
      'latitude',
      'longitude',
    ],
    floats: ['latitude', 'longitude'],
  },
  CONTACT: {
    columns: ['sandbox_message_index', 'person_id', 'name', 'phone_number', 'relationship', 'is_self'],
    floats: [],
  },
  MESSAGING: {
    columns: [
      'sandbox_message_index',
      'message_id',
      'sender_person_id',
      'sender_phone_number',
      'recipient_person_id',
      'recipient_phone_number',
      'content',
      'creation_timestamp',
    ],
    floats: ['creation_timestamp'],
  },
  REMINDER: {
    columns: [
      'sandbox_message_index',
      'reminder_id',
      'content',
      'creation_timestamp',
      'reminder_timestamp',
      'latitude',
      'longitude',
    ],
    floats: ['creation_timestamp', 'reminder_timestamp', 'latitude', 'longitude'],
  },
};

const INDEX = 'sandbox_message_index';

/** polars' NoDataError from remove_from_database: no row of the current snapshot matched. */
export class NoMatchingRows extends Error {}

/** A row with every schema column present (missing ones null), in schema order. */
function normalise(ns: Namespace, row: Row, index: number): Row {
  const out: Row = {};
  for (const c of SCHEMAS[ns].columns) out[c] = c === INDEX ? index : (row[c] ?? null);
  return out;
}

export function isHeadguard(row: Row): boolean {
  for (const k in row) if (k !== INDEX && row[k] !== null && row[k] !== undefined) return false;
  return true;
}

const isUserSimFewShot = (row: Row): boolean =>
  Array.isArray(row.visible_to) && row.visible_to.length === 1 && row.visible_to[0] === 'USER';

export interface GetOptions {
  /** Snapshot no later than this index; default: the current (max + 1). */
  index?: number;
  /** All snapshots up to the index (message history), not just the latest. */
  allHistory?: boolean;
  keepIndex?: boolean;
}

export class SandboxContext {
  /** max_sandbox_message_index, recomputed after a change (it is read at every snapshot lookup). */
  private maxIndex: number | undefined;
  /** Where new person / message / reminder ids come from (uuid4 upstream); a test may make it deterministic. */
  newId: () => string = () => randomUUID();

  private constructor(readonly dbs: Record<Namespace, Row[]>) {}

  /** A fresh context: headguards plus upstream's default settings row. */
  static empty(): SandboxContext {
    const dbs = Object.fromEntries(NAMESPACES.map((ns) => [ns, [normalise(ns, {}, 0)]])) as Record<Namespace, Row[]>;
    dbs.SETTING.push(
      normalise(
        'SETTING',
        {
          // uuid5(NAMESPACE_URL, "my_phone"), as ExecutionContext.__init__ sets it.
          device_id: '04640c30-ec89-5a3c-9fb4-4af3101c8e04',
          cellular: true,
          wifi: true,
          location_service: true,
          low_battery_mode: false,
          latitude: 37.334606,
          longitude: -122.009102,
        },
        0,
      ),
    );
    return new SandboxContext(dbs);
  }

  /** From upstream's `ExecutionContext.to_dict()["_dbs"]` (rows of every snapshot, in order). */
  static fromDbs(dbs: Record<string, Row[]>): SandboxContext {
    const out = {} as Record<Namespace, Row[]>;
    for (const ns of NAMESPACES) {
      const rows = dbs[ns];
      if (!Array.isArray(rows)) throw new Error(`_dbs.${ns}: expected an array of rows`);
      out[ns] = rows.map((r, i) => {
        if (typeof r[INDEX] !== 'number') throw new Error(`_dbs.${ns}[${i}].${INDEX}: expected a number`);
        return normalise(ns, r, r[INDEX] as number);
      });
    }
    return new SandboxContext(out);
  }

  /** An independent copy (an episode's fork). */
  clone(): SandboxContext {
    const c = new SandboxContext(structuredClone(this.dbs));
    c.newId = this.newId;
    return c;
  }

  /** -1 when no messages exist. */
  get maxSandboxMessageIndex(): number {
    if (this.maxIndex === undefined) {
      let max = -1;
      for (const r of this.dbs.SANDBOX) if (!isHeadguard(r)) max = Math.max(max, r[INDEX] as number);
      this.maxIndex = max;
    }
    return this.maxIndex;
  }

  /** Index of the first user message that is not a user-simulator few-shot example; -1 if none. */
  get firstUserSandboxMessageIndex(): number {
    const row = this.dbs.SANDBOX.find((r) => r.sender === 'USER' && !isUserSimFewShot(r));
    return row ? (row[INDEX] as number) : -1;
  }

  /** The index of the most recent snapshot of `ns` no later than `query` (get_most_recent_snapshot_sandbox_message_index). */
  snapshotIndex(ns: Namespace, query: number): number {
    const db = this.dbs[ns];
    if (!db.some((r) => !isHeadguard(r))) return -1;
    const max = this.maxSandboxMessageIndex + 1;
    if (query > max)
      throw new Error(`query_index=${query} is larger than the largest available sandbox_message_index + 1 = ${max}`);
    const indices = [...new Set(db.map((r) => r[INDEX] as number))].sort((a, b) => a - b);
    let pos = 0;
    while (pos < indices.length && indices[pos] <= query) pos++;
    return indices[Math.max(pos - 1, 0)];
  }

  getDatabase(ns: Namespace, opts: GetOptions = {}): Row[] {
    const target = this.snapshotIndex(ns, opts.index ?? this.maxSandboxMessageIndex + 1);
    let rows = this.dbs[ns].filter((r) => (opts.allHistory ? (r[INDEX] as number) <= target : r[INDEX] === target));
    rows = rows.filter((r) => !isHeadguard(r));
    if (!opts.keepIndex) rows = rows.map(({ [INDEX]: _i, ...rest }) => rest);
    return structuredClone(rows);
  }

  /** Copies the latest snapshot to index max + 1 unless that snapshot already exists. */
  private maybeCreateSnapshot(ns: Namespace): void {
    const next = this.maxSandboxMessageIndex + 1;
    if (this.dbs[ns].some((r) => r[INDEX] === next)) return;
    const recent = this.snapshotIndex(ns, next - 1);
    const copy = this.dbs[ns].filter((r) => r[INDEX] === recent).map((r) => ({ ...structuredClone(r), [INDEX]: next }));
    this.dbs[ns].push(...copy);
  }

  addToDatabase(ns: Namespace, rows: Row[]): void {
    const cols = new Set(SCHEMAS[ns].columns);
    for (const row of rows) {
      const unknown = Object.keys(row).filter((k) => !cols.has(k));
      if (unknown.length) throw new Error(`${ns}: unknown column(s) ${unknown.join(', ')}`);
      if (isHeadguard(row))
        throw new Error(`${ns}: cannot add a row with all None values (reserved for the headguard)`);
    }
    if (ns !== 'SANDBOX') {
      this.maybeCreateSnapshot(ns);
      const idx = this.maxSandboxMessageIndex + 1;
      for (const row of rows) this.dbs[ns].push(normalise(ns, structuredClone(row), idx));
      return;
    }
    const current = this.getDatabase('SANDBOX');
    let active = current.length ? current[current.length - 1].conversation_active : true;
    let idx = this.maxSandboxMessageIndex + 1;
    for (const row of rows) {
      const r = normalise(ns, structuredClone(row), idx++);
      if (r.conversation_active === null) r.conversation_active = active;
      active = r.conversation_active;
      this.dbs.SANDBOX.push(r);
    }
    this.maxIndex = undefined;
  }

  /** Removes rows of the current snapshot matching `pred`; throws when none match (NoDataError upstream). */
  removeFromDatabase(ns: Namespace, pred: (row: Row) => boolean): void {
    if (ns === 'SANDBOX') throw new Error('Removal from SANDBOX database is not allowed');
    const idx = this.maxSandboxMessageIndex + 1;
    this.maybeCreateSnapshot(ns);
    const hit = (r: Row) => r[INDEX] === idx && pred(r) && !isHeadguard(r);
    if (!this.dbs[ns].some(hit)) throw new NoMatchingRows(`No db entry matching predicate found in ${ns}`);
    this.dbs[ns] = this.dbs[ns].filter((r) => !hit(r));
  }

  /** Replaces the current snapshot of `ns` with `rows` (a headguard is put first). */
  updateDatabase(ns: Namespace, rows: Row[]): void {
    let idx: number;
    if (ns !== 'SANDBOX') {
      this.maybeCreateSnapshot(ns);
      idx = this.maxSandboxMessageIndex + 1;
    } else idx = this.maxSandboxMessageIndex;
    const next = [
      normalise(ns, {}, idx),
      ...rows.filter((r) => !isHeadguard(r)).map((r) => normalise(ns, structuredClone(r), idx)),
    ];
    this.dbs[ns] = [...this.dbs[ns].filter((r) => r[INDEX] !== idx), ...next];
    this.maxIndex = undefined;
  }
}
