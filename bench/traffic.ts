/**
 * What bench/load and bench/faults share: the seeds (an account and key, a 100 ha field with a
 * season of synthetic Sentinel-2 captures, a second field for PATCHes, two HTTPS webhook receivers
 * subscribed to every event), the mixed request stream, and the audit that counts, from the
 * database and the receivers, reports that never finished and webhook deliveries never received.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApiKey, findOrCreateAccount } from '../src/accounts/api-keys.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../src/imagery/synthetic.js';
import { migrate, openDatabase, type Database } from '../src/platform/database.js';
import { makePki, startReceiver, type Receiver } from '../test/helpers/tls.js';
import { Cluster } from './cluster.js';

export interface Seeds {
  db: Database;
  key: string;
  accountId: string;
  fieldId: string;
  patchFieldId: string;
  dates: string[];
  receivers: Receiver[];
  /** Webhooks registered (each subscribed to every event). */
  webhooks: number;
  /** Database time just before the webhooks were registered: events from then on must arrive. */
  since: Date;
}

/** Writes the CA for NODE_EXTRA_CA_CERTS, starts the receivers; call before the processes start. */
export async function prepareReceivers(scratch: string, count = 2): Promise<{ caFile: string; receivers: Receiver[] }> {
  const pki = makePki();
  const caFile = path.join(scratch, 'ca.pem');
  writeFileSync(caFile, pki.ca);
  // Node's default keep-alive timeout (5 s), as a real receiver has: with the test helper's 1 s,
  // the service's agent keeps no connection to it and every delivery paid a TLS handshake.
  const receivers = await Promise.all(
    Array.from({ length: count }, () => startReceiver(pki, '/hook', { keepAliveTimeoutMs: 5000 })),
  );
  return { caFile, receivers };
}

/** Migrates the database and creates the account and its key (as `npm run keys` does). */
export async function seedAccount(databaseUrl: string): Promise<{ db: Database; key: string; accountId: string }> {
  const db = await openDatabase({ url: databaseUrl, maxConnections: 4 });
  await migrate(db);
  const account = await findOrCreateAccount(db, 'bench');
  const { key } = await createApiKey(db, account.id, 'operational bench');
  return { db, key, accountId: account.id };
}

async function call(base: string, key: string, method: string, url: string, body?: unknown): Promise<any> {
  const r = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

/**
 * Through the running api: registers the webhooks (each answers the test delivery), then a 100 ha
 * field (100 × 100 pixels of 10 m) with a season of captures every 8 days, and a field for PATCHes.
 */
export async function seedService(
  base: string,
  acct: { db: Database; key: string; accountId: string },
  imageryDir: string,
  receivers: Receiver[],
): Promise<Seeds> {
  const { db, key } = acct;
  const [{ now: since }] = await db.query<{ now: Date }>('SELECT now()');
  for (const rx of receivers) await call(base, key, 'POST', '/v1/webhooks', { url: rx.url, events: ['*'] });
  for (const rx of receivers) rx.received.length = 0; // the registration challenges
  mkdirSync(imageryDir, { recursive: true });
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 200, seed: 7 };
  const dates = datesEvery('2025-03-26', '2025-10-07', 8);
  const caps = writeSyntheticSeason(imageryDir, spec, dates, '2025-04-10', '2025-09-20');
  const field = await call(base, key, 'POST', '/v1/fields', {
    name: 'load 100 ha',
    boundary: sceneField(spec),
    crop_type: 'maize',
    planting_date: '2025-04-10',
    harvest_date: '2025-09-20',
  });
  const small = await call(base, key, 'POST', '/v1/fields', {
    name: 'patched',
    boundary: sceneField(spec, 0.1),
    crop_type: 'wheat',
  });
  for (const c of caps) {
    await call(base, key, 'POST', '/v1/imagery', {
      source: 'sentinel-2-l2a',
      capture_date: c.date,
      bands: c.files,
      mask: { href: c.scl, kind: 'scl' },
      scale: 0.0001,
      offset: -0.1,
    });
  }
  return {
    db,
    key,
    accountId: acct.accountId,
    fieldId: field.id,
    patchFieldId: small.id,
    dates,
    receivers,
    webhooks: receivers.length,
    since: new Date(since),
  };
}

export type Kind = 'indices' | 'timeseries' | 'report' | 'poll' | 'patch';

export interface Planned {
  kind: Kind;
  method: 'GET' | 'POST' | 'PATCH';
  path: string;
  body?: string;
}

/** Share of each kind in the stream (per 100 requests). */
export const MIX: Record<Kind, number> = { indices: 40, timeseries: 20, report: 5, poll: 15, patch: 20 };

const REPORTS = [
  { type: 'scouting', format: 'json' },
  { type: 'prescription', format: 'csv', options: { prescription_input: 'nitrogen', zones: 4 } },
  { type: 'health_summary', format: 'json' },
  { type: 'seasonal', format: 'csv' },
  { type: 'scouting', format: 'pdf' },
];
const INDICES = ['NDVI', 'NDRE', 'EVI', 'SAVI'];

/**
 * The mixed stream: GET indices with zonal statistics on a rotating date and index, a weekly time
 * series, report requests (POST; at most `maxReportsPerS` a second, the rest become polls), polls
 * of an accepted report, and PATCHes that change the crop type, so that each emits field.updated.
 */
export class Mix {
  private n = 0;
  private readonly slots: Kind[] = [];
  private readonly reportTimes: number[] = [];
  /** Accepted reports (202), with the time of acceptance. */
  readonly accepted = new Map<string, number>();
  private readonly recent: string[] = [];

  constructor(
    private readonly seeds: Pick<Seeds, 'fieldId' | 'patchFieldId' | 'dates'>,
    private readonly maxReportsPerS = 4,
  ) {
    // Interleave the kinds evenly over each 100 requests.
    const pool: Array<[Kind, number]> = Object.entries(MIX) as Array<[Kind, number]>;
    for (let i = 0; i < 100; i++) {
      let best: Kind = 'indices';
      let bestScore = -Infinity;
      for (const [k, w] of pool) {
        const score = (w * (i + 1)) / 100 - this.slots.filter((s) => s === k).length;
        if (score > bestScore) {
          best = k;
          bestScore = score;
        }
      }
      this.slots.push(best);
    }
  }

  /** Set: every request is of this kind (the per-kind cost steps of bench/load). */
  only: Kind | null = null;

  next(): Planned {
    const i = this.n++;
    let kind = this.only ?? this.slots[i % this.slots.length]!;
    const now = Date.now();
    if (kind === 'report') {
      while (this.reportTimes.length && now - this.reportTimes[0]! > 1000) this.reportTimes.shift();
      if (this.reportTimes.length >= this.maxReportsPerS) kind = 'poll';
      else this.reportTimes.push(now);
    }
    if (kind === 'poll' && !this.recent.length) kind = 'indices';
    const f = this.seeds.fieldId;
    switch (kind) {
      case 'indices': {
        const date = this.seeds.dates[(i * 7) % this.seeds.dates.length];
        return {
          kind,
          method: 'GET',
          path: `/v1/fields/${f}/indices?index=${INDICES[i % INDICES.length]}&date=${date}&zonal_stats=true&geojson=false`,
        };
      }
      case 'timeseries':
        return {
          kind,
          method: 'GET',
          path: `/v1/fields/${f}/indices/timeseries?index=${INDICES[i % 2]}&start_date=2025-04-01&end_date=2025-10-01&interval=weekly&max_cloud_cover=100`,
        };
      case 'report':
        return {
          kind,
          method: 'POST',
          path: `/v1/fields/${f}/reports`,
          body: JSON.stringify(REPORTS[i % REPORTS.length]),
        };
      case 'poll':
        return { kind, method: 'GET', path: `/v1/reports/${this.recent[i % this.recent.length]}` };
      case 'patch':
        return {
          kind,
          method: 'PATCH',
          path: `/v1/fields/${this.seeds.patchFieldId}`,
          body: JSON.stringify({ crop_type: `wheat-${i}` }),
        };
    }
  }

  /** Feed every answer back: an accepted report becomes pollable and is audited at the end. */
  answered(kind: Kind, status: number, body: string): void {
    if (kind !== 'report' || status !== 202) return;
    try {
      const id = (JSON.parse(body) as { id: string }).id;
      this.accepted.set(id, Date.now());
      this.recent.push(id);
      if (this.recent.length > 50) this.recent.shift();
    } catch {
      /* counted as accepted only with an id */
    }
  }
}

export interface AuditWindow {
  from: number;
  to: number;
}

export interface AuditRow {
  reportsAccepted: number;
  reportsReady: number;
  reportsFailed: number;
  /** Accepted, but neither ready nor failed. */
  reportsLost: number;
  /** Of those, how many still have a queued or running job (backlog, not lost) when asked. */
  reportsQueued: number;
  events: number;
  deliveriesExpected: number;
  deliveriesReceived: number;
  /** Expected (event × subscribed webhook) but never received. */
  deliveriesLost: number;
  /** Receipts beyond the first of a delivery id (X-Service-Delivery). */
  duplicates: number;
  /** Events for which no delivery row was ever made (lost before the queue). */
  undispatched: number;
  /** First report accepted in the window that became ready: ms from the window start. */
  firstReadyMs: number | null;
  /** First receipt of a delivery for an event emitted in the window: ms from the window start. */
  firstDeliveredMs: number | null;
}

interface Snapshot {
  reports: Map<string, { status: string; completed: number | null; queued: boolean }>;
  events: Array<{ id: string; at: number }>;
  deliveries: Map<string, string[]>; // event id → delivery ids
  receipts: Map<string, { count: number; first: number }>;
}

async function snapshot(seeds: Seeds, mix: Mix, jobPending?: (jobId: string) => Promise<boolean>): Promise<Snapshot> {
  const ids = [...mix.accepted.keys()];
  const rows = await seeds.db.query<{ id: string; status: string; completed_at: Date | null; job_id: string | null }>(
    'SELECT id, status, completed_at, job_id FROM reports WHERE id = ANY($1)',
    [ids],
  );
  const reports = new Map<string, { status: string; completed: number | null; queued: boolean }>();
  for (const r of rows) {
    const unfinished = r.status === 'pending' || r.status === 'processing';
    const queued = unfinished && !!jobPending && !!r.job_id && (await jobPending(r.job_id).catch(() => false));
    reports.set(r.id, {
      status: r.status,
      completed: r.completed_at ? new Date(r.completed_at).getTime() : null,
      queued,
    });
  }
  const ev = await seeds.db.query<{ id: string; created_at: Date }>(
    'SELECT id, created_at FROM outbox WHERE account_id = $1 AND created_at >= $2',
    [seeds.accountId, seeds.since],
  );
  const dl = await seeds.db.query<{ id: string; event_id: string }>(
    'SELECT id, event_id FROM deliveries WHERE account_id = $1',
    [seeds.accountId],
  );
  const deliveries = new Map<string, string[]>();
  for (const d of dl) deliveries.set(d.event_id, [...(deliveries.get(d.event_id) ?? []), d.id]);
  const receipts = new Map<string, { count: number; first: number }>();
  for (const rx of seeds.receivers) {
    for (const r of rx.received) {
      const id = String(r.headers['x-service-delivery'] ?? '');
      const prev = receipts.get(id);
      receipts.set(id, prev ? { count: prev.count + 1, first: Math.min(prev.first, r.at) } : { count: 1, first: r.at });
    }
  }
  return { reports, events: ev.map((e) => ({ id: e.id, at: new Date(e.created_at).getTime() })), deliveries, receipts };
}

/** True when every accepted report has finished and every expected delivery has been received. */
export async function settled(seeds: Seeds, mix: Mix): Promise<boolean> {
  const a = audit(await snapshot(seeds, mix), seeds, mix, { from: 0, to: Infinity });
  return a.reportsLost === 0 && a.deliveriesLost === 0;
}

function audit(s: Snapshot, seeds: Seeds, mix: Mix, w: AuditWindow): AuditRow {
  const row: AuditRow = {
    reportsAccepted: 0,
    reportsReady: 0,
    reportsFailed: 0,
    reportsLost: 0,
    reportsQueued: 0,
    events: 0,
    deliveriesExpected: 0,
    deliveriesReceived: 0,
    deliveriesLost: 0,
    duplicates: 0,
    undispatched: 0,
    firstReadyMs: null,
    firstDeliveredMs: null,
  };
  const inWindow = (t: number) => t >= w.from && t < w.to;
  for (const [id, at] of mix.accepted) {
    if (!inWindow(at)) continue;
    row.reportsAccepted++;
    const r = s.reports.get(id);
    if (r?.status === 'ready') {
      row.reportsReady++;
      if (r.completed !== null && (row.firstReadyMs === null || r.completed - w.from < row.firstReadyMs))
        row.firstReadyMs = Math.max(0, r.completed - w.from);
    } else if (r?.status === 'failed') row.reportsFailed++;
    else {
      row.reportsLost++;
      if (r?.queued) row.reportsQueued++;
    }
  }
  for (const e of s.events) {
    if (!inWindow(e.at)) continue;
    row.events++;
    row.deliveriesExpected += seeds.webhooks;
    const dl = s.deliveries.get(e.id) ?? [];
    if (!dl.length) row.undispatched++;
    let got = 0;
    for (const d of dl) {
      const rc = s.receipts.get(d);
      if (!rc) continue;
      got++;
      row.duplicates += rc.count - 1;
      if (row.firstDeliveredMs === null || rc.first - w.from < row.firstDeliveredMs)
        row.firstDeliveredMs = Math.max(0, rc.first - w.from);
    }
    row.deliveriesReceived += got;
  }
  row.deliveriesLost = row.deliveriesExpected - row.deliveriesReceived;
  return row;
}

/** Audits several windows against one snapshot (`jobPending` tells backlog from loss). */
export async function auditWindows(
  seeds: Seeds,
  mix: Mix,
  windows: AuditWindow[],
  jobPending?: (jobId: string) => Promise<boolean>,
): Promise<AuditRow[]> {
  const s = await snapshot(seeds, mix, jobPending);
  return windows.map((w) => audit(s, seeds, mix, w));
}

export interface Topology {
  cluster: Cluster;
  seeds: Seeds;
  scratch: string;
  /** Stops the processes and receivers, closes the seed connection, deletes the scratch directory. */
  close(): Promise<void>;
}

/**
 * Receivers, account and key, two api and two worker processes (extra env on top of the bench
 * defaults), then the seeds through the first api. Everything is undone by close(), also when
 * bring-up fails half way.
 */
export async function bringUp(o: {
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  env?: Record<string, string>;
}): Promise<Topology> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'fa-ops-bench-'));
  const undo: Array<() => Promise<void>> = [async () => rmSync(scratch, { recursive: true, force: true })];
  const close = async () => {
    for (const u of undo.reverse()) await u().catch((err) => console.error(`cleanup: ${(err as Error).message}`));
  };
  try {
    const { caFile, receivers } = await prepareReceivers(scratch);
    undo.push(async () => {
      for (const rx of receivers) await rx.close();
    });
    const acct = await seedAccount(o.databaseUrl);
    undo.push(() => acct.db.close());
    const cluster = new Cluster({
      databaseUrl: o.databaseUrl,
      redisUrl: o.redisUrl,
      queuePrefix: o.queuePrefix,
      env: {
        DATA_DIR: path.join(scratch, 'data'),
        IMAGERY_ROOTS: path.join(scratch, 'imagery'),
        NODE_EXTRA_CA_CERTS: caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        SIGNING_KEY: 'operational-bench-signing-key-0123456789',
        LOG_LEVEL: 'warn',
        COMPUTE_THREADS: '1',
        DEV_BOOTSTRAP: 'false',
        DEMO: 'false',
        ...o.env,
      },
    });
    undo.push(() => cluster.stop());
    await cluster.start(2, 2);
    const seeds = await seedService(cluster.apis[0]!.base!, acct, path.join(scratch, 'imagery', 'season'), receivers);
    return { cluster, seeds, scratch, close };
  } catch (err) {
    await close();
    throw err;
  }
}
