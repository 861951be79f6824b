/**
 * STAC API subscriptions at scale (issue 18): an account with BENCH_SUB_FIELDS fields (default
 * 1,000; the 100 ha square of the demo, 1 km × 1 km, tiled edge to edge over a synthetic
 * Sentinel-2 scene near the demo's, UTM 31N) subscribed to the tests' STAC API on loopback
 * (test/helpers/stac-api-server.ts over src/imagery/stac-api.ts), which then publishes
 * BENCH_SUB_ITEMS new Items (default 100) in Earth Search's shape, every one covering every field.
 * Each Item's COGs are served by the range server (test/helpers/range-server.ts) under a path of
 * its own (one scene written once, mounted once per Item), so no Item reads another's windows from
 * the window cache, and the bytes each registration read are counted per Item.
 *
 * The service runs in this process (embedded database and queue, the worker's subscription
 * scheduler driven by tick()). First poll: the backfill of every field (nothing published yet).
 * Then the Items are published, POST /v1/imagery/subscriptions/{id}/poll asks for a poll, and one
 * scheduler tick runs it. Printed: search requests per poll (HTTP requests to /search, pages
 * included), seconds from the poll request to the last imagery.available, Items/s registered, the
 * process's CPU time during the poll (all threads), bytes read per Item (range reads) against the
 * bytes of the windows the fields need (every inspected file's header, up to its first tile, plus
 * the tiles of B04, B08 and SCL, which field-level cloud cover reads, that meet a field's window),
 * and peak RSS (sampled every 20 ms during the poll, compute threads included). Goals: ≤ 10 search requests per poll for 1,000
 * fields; 100 Items registered and announced in ≤ 30 s; bytes per Item ≤ 2× the windows needed.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApiKey, findOrCreateAccount } from '../src/accounts/api-keys.js';
import { buildApp } from '../src/app.js';
import { createField } from '../src/fields/index.js';
import { fromWgs84, toWgs84 } from '../src/imagery/crs.js';
import { DEMO_SEASON } from '../src/imagery/demo.js';
import { memorySource } from '../src/imagery/raster-source.js';
import { SYNTHETIC_BANDS, syntheticItem, writeSyntheticSeason, type SceneSpec } from '../src/imagery/synthetic.js';
import { checkTiffStructure } from '../src/imagery/tiff-structure.js';
import { loadConfig } from '../src/platform/config.js';
import { openDatabase, type Database, type Sql } from '../src/platform/database.js';
import { openRuntime } from '../src/runtime.js';
import { startRangeServer } from '../test/helpers/range-server.js';
import { startStacApiServer } from '../test/helpers/stac-api-server.js';

const FIELDS = Number(process.env.BENCH_SUB_FIELDS ?? 1000);
const ITEMS = Number(process.env.BENCH_SUB_ITEMS ?? 100);
/** The measured poll is stopped after this (the goal is 30 s); what it registered by then is reported. */
const LIMIT_S = Number(process.env.BENCH_SUB_LIMIT_S ?? 180);
const GOAL_SEARCHES = 10;
const GOAL_SECONDS = 30;
const GOAL_BYTES_RATIO = 2;
/** The writer's tile edge (src/imagery/tiff-writer.ts default). */
const TILE = 256;
const FIELD_M = 1000;

/** Milliseconds per statement (its first 70 characters), with BENCH_SUB_DETAIL. */
const statementMs = new Map<string, { n: number; ms: number }>();
function timedStatements(db: Database): Database {
  if (!process.env.BENCH_SUB_DETAIL) return db;
  const timed = (sql: Sql): Sql => ({
    ...sql,
    query: async (text, params, opts) => {
      const t0 = performance.now();
      try {
        return await sql.query(text, params, opts);
      } finally {
        const key = text.replace(/\s+/g, ' ').trim().slice(0, 70);
        const s = statementMs.get(key) ?? { n: 0, ms: 0 };
        s.n++;
        s.ms += performance.now() - t0;
        statementMs.set(key, s);
      }
    },
  });
  const out = Object.create(db) as Database;
  out.query = timed(db).query;
  out.transaction = (fn) => db.transaction((tx) => fn(timed(tx)));
  return out;
}

/** CPU seconds of each thread of this process (Linux /proc; empty elsewhere). */
function threadTimes(): Map<number, number> {
  const out = new Map<number, number>();
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), (Number(f[11]) + Number(f[12])) / 100);
    }
  } catch {
    /* not Linux */
  }
  return out;
}

const mb = (b: number) => (b / 1_048_576).toFixed(1);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');

/** Field squares (UTM, m) tiled edge to edge from the scene's top-left corner, row by row. */
function fieldSquares(spec: SceneSpec, n: number, cols: number): Array<[number, number, number, number]> {
  const out: Array<[number, number, number, number]> = [];
  for (let k = 0; k < n; k++) {
    const x0 = spec.originX + (k % cols) * FIELD_M;
    const y1 = spec.originY - Math.floor(k / cols) * FIELD_M;
    out.push([x0, y1 - FIELD_M, x0 + FIELD_M, y1]);
  }
  return out;
}

/**
 * Bytes a registration needs of one Item: every inspected file's header (everything before its
 * first tile) and, for the files field-level cloud cover reads, the tiles meeting a field window
 * (the window of the field's WGS84 boundary, as the reader computes it, on the file's grid).
 */
async function bytesNeeded(
  files: Record<string, string>,
  spec: SceneSpec,
  boundaries: Array<Array<[number, number]>>,
): Promise<{ headers: number; tiles: number }> {
  const fwd = fromWgs84(spec.epsg);
  let headers = 0;
  let tiles = 0;
  for (const [band, file] of Object.entries(files)) {
    const bytes = new Uint8Array(readFileSync(file));
    const st = await checkTiffStructure(memorySource(bytes));
    const offsets = st.blocks!.offsets;
    headers += Math.min(...offsets);
    if (!['B04', 'B08', 'SCL'].includes(band)) continue;
    const res = band === 'SCL' ? 20 : SYNTHETIC_BANDS[band as keyof typeof SYNTHETIC_BANDS];
    const n = Math.ceil(spec.size / (res / 10));
    const across = Math.ceil(n / TILE);
    const wanted = new Set<number>();
    for (const ring of boundaries) {
      const xy = ring.map((p) => fwd(p));
      const col0 = Math.max(0, Math.floor((Math.min(...xy.map((p) => p[0])) - spec.originX) / res));
      const col1 = Math.min(n - 1, Math.ceil((Math.max(...xy.map((p) => p[0])) - spec.originX) / res) - 1);
      const row0 = Math.max(0, Math.floor((spec.originY - Math.max(...xy.map((p) => p[1]))) / res));
      const row1 = Math.min(n - 1, Math.ceil((spec.originY - Math.min(...xy.map((p) => p[1]))) / res) - 1);
      for (let ty = Math.floor(row0 / TILE); ty <= Math.floor(row1 / TILE); ty++)
        for (let tx = Math.floor(col0 / TILE); tx <= Math.floor(col1 / TILE); tx++) wanted.add(ty * across + tx);
    }
    for (const t of wanted) tiles += st.blocks!.counts[t]!;
  }
  return { headers, tiles };
}

export default async function subscriptionsBench(): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'subbench-'));
  // The COGs are on loopback: the compute threads read the environment when the pool starts.
  process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = 'true';
  const range = await startRangeServer();
  const api = await startStacApiServer();
  const db = timedStatements(await openDatabase({}));
  const config = loadConfig({
    IMAGERY_ROOTS: scratch,
    PUBLIC_BASE_URL: 'http://localhost:3000',
    LOG_LEVEL: 'silent',
    DEMO: 'false',
    IMAGERY_ALLOW_PRIVATE_NETWORKS: 'true',
    SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS: 'true',
  });
  // The job queues and the outbox dispatcher poll at their defaults, as under `npm start` (the
  // tests' 50 ms made the database queue's claim and the dispatcher's scan a third of the main
  // thread's work during the poll).
  const runtime = await openRuntime(config, { db, log: () => {}, subscriptionTickMs: 0 });
  const app = await buildApp(runtime);
  try {
    const scheduler = runtime.subscriptions;
    if (!scheduler) throw new Error('the runtime has no subscription scheduler (ROLE=api?)');
    const cols = Math.ceil(Math.sqrt(FIELDS));
    const rows = Math.ceil(FIELDS / cols);
    const spec: SceneSpec = {
      epsg: 32631,
      originX: 600_000,
      originY: 5_620_000,
      size: (Math.max(cols, rows) * FIELD_M) / 10,
      seed: 18,
    };
    let t = performance.now();
    const sceneDir = path.join(scratch, 'scene');
    const [capture] = writeSyntheticSeason(sceneDir, spec, ['2025-06-01'], DEMO_SEASON.planting, DEMO_SEASON.harvest, {
      deflateLevel: 1,
    });
    console.log(
      `scene: ${spec.size}² px at 10 m (${(spec.size / 100).toFixed(0)} km square), 12 bands + SCL written in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );

    const account = await findOrCreateAccount(db, 'bench-subscriptions');
    const { key } = await createApiKey(db, account.id);
    const auth = { authorization: `Bearer ${key}` };
    t = performance.now();
    const inv = toWgs84(spec.epsg);
    const boundaries: Array<Array<[number, number]>> = [];
    for (const [k, [x0, y0, x1, y1]] of fieldSquares(spec, FIELDS, cols).entries()) {
      const ring = [inv([x0, y0]), inv([x1, y0]), inv([x1, y1]), inv([x0, y1])] as Array<[number, number]>;
      ring.push(ring[0]!);
      boundaries.push(ring);
      await createField(
        db,
        account.id,
        { name: `bench ${k}`, boundary: { type: 'Polygon', coordinates: [ring] } as never },
        { maxAreaHa: config.maxFieldAreaHa },
      );
    }
    console.log(
      `${FIELDS} fields of 100 ha (${cols} × ${rows}) created in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );

    const created = await app.inject({
      method: 'POST',
      url: '/v1/imagery/subscriptions',
      headers: auth,
      payload: { stac_api_url: api.url, start_date: '2025-01-01' },
    });
    if (created.statusCode !== 201) throw new Error(`subscription: ${created.statusCode} ${created.body}`);
    const subId = created.json().id as string;

    // First poll: every field's backfill, nothing published yet.
    api.resetLog();
    t = performance.now();
    const [first] = await scheduler.tick();
    const backfillSearches = api.count('search');
    console.log(
      `first poll (backfill of ${FIELDS} fields, empty catalogue): ${backfillSearches} search requests, ${((performance.now() - t) / 1000).toFixed(2)} s, outcome ${first?.outcome}`,
    );

    // Publish the new Items: one scene, mounted under a path per Item.
    for (let k = 0; k < ITEMS; k++) {
      const mount = `i${String(k).padStart(4, '0')}`;
      range.mount(mount, sceneDir);
      const date = new Date(Date.parse('2025-03-01T00:00:00Z') + k * 86_400_000).toISOString().slice(0, 10);
      const item = syntheticItem({ ...capture!, date }, spec, k, {
        href: (f) => range.href(mount, path.basename(f)),
        tile: `31U${String(k).padStart(3, '0')}`,
      });
      api.publish(item);
    }
    api.resetLog();
    range.resetCounters();
    let peakRss = process.memoryUsage.rss();
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 20);
    statementMs.clear();
    const cpu0 = process.cpuUsage();
    const mark0 = process.hrtime.bigint() / 1000n;
    const threads0 = threadTimes();
    const t0 = Date.now();
    const asked = await app.inject({ method: 'POST', url: `/v1/imagery/subscriptions/${subId}/poll`, headers: auth });
    if (asked.statusCode !== 202) throw new Error(`poll: ${asked.statusCode} ${asked.body}`);
    let timer: NodeJS.Timeout | undefined;
    const results = await Promise.race([
      scheduler.tick(),
      new Promise<null>((r) => {
        timer = setTimeout(() => r(null), LIMIT_S * 1000);
      }),
    ]);
    clearTimeout(timer);
    const stopped = results === null;
    // Past the limit: the scheduler stops the poll (its lease given back), the figures are what it did by then.
    if (stopped) await scheduler.stop();
    const pollSeconds = (Date.now() - t0) / 1000;
    // The whole process (compute threads, the embedded database, both test servers): on a shared
    // machine the CPU time is the comparable figure, the wall time depends on the neighbours.
    const cpu = process.cpuUsage(cpu0);
    // With --cpu-prof: the poll's span on the profiles' clock (µs), to cut them to it.
    if (process.env.BENCH_SUB_DETAIL) {
      console.log(`poll span (monotonic µs, the clock of --cpu-prof): ${mark0} ${process.hrtime.bigint() / 1000n}`);
      const threads1 = threadTimes();
      const busy = [...threads1]
        .map(([tid, t]) => [tid, t - (threads0.get(tid) ?? 0)] as const)
        .filter(([, t]) => t > 0)
        .sort((a, b) => b[1] - a[1]);
      const top = [...statementMs].sort((a, b) => b[1].ms - a[1].ms).slice(0, 12);
      console.log('statements (wall ms, count):');
      for (const [k, v] of top) console.log(`  ${v.ms.toFixed(0).padStart(7)} ${String(v.n).padStart(6)}  ${k}`);
      console.log(
        `CPU s per thread during the poll (${process.pid} is the main one): ${busy.map(([tid, t]) => `${tid} ${t.toFixed(2)}`).join(', ')}`,
      );
    }
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    clearInterval(sampler);
    const poll = results?.find((r) => r !== null);
    const searches = api.count('search');
    const [events] = (await db.query<{ n: number; last: Date | null }>(
      `SELECT count(*)::int AS n, max(created_at) AS last FROM outbox
        WHERE type = 'imagery.available' AND data->>'subscription_id' = $1`,
      [subId],
    )) as [{ n: number; last: Date | null }];
    const toLast = events.last ? (events.last.getTime() - t0) / 1000 : NaN;
    const [{ n: registered }] = (await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM imagery WHERE subscription_id = $1',
      [subId],
    )) as [{ n: number }];
    if (stopped)
      console.log(
        `\nthe poll was stopped after BENCH_SUB_LIMIT_S = ${LIMIT_S} s with ${registered} of ${ITEMS} Items registered`,
      );

    // Items whose registration completed (a stopped poll leaves one half read).
    const done = new Set(
      (
        await db.query<{ href: string }>(
          `SELECT COALESCE(bands->'B04'->>'href', bands->>'B04') AS href FROM imagery WHERE subscription_id = $1`,
          [subId],
        )
      ).map((r) => new URL(r.href).pathname.split('/')[1]!),
    );
    const perItem = [...range.mounts.entries()].filter(([m]) => done.has(m)).map(([, c]) => c.bytes);
    const meanRead = perItem.reduce((a, b) => a + b, 0) / Math.max(1, perItem.length);
    const maxRead = Math.max(0, ...perItem);
    const files = { ...capture!.files, SCL: capture!.scl };
    const need = await bytesNeeded(files, spec, boundaries);
    const needed = need.headers + need.tiles;
    const sceneBytes = Object.values(files).reduce((a, f) => a + readFileSync(f).length, 0);

    console.log(
      `\npoll of ${ITEMS} new Items over ${FIELDS} fields (outcome ${stopped ? `stopped after ${LIMIT_S} s` : poll?.outcome}${poll?.error ? `: ${poll.error}` : ''}):`,
    );
    console.log(
      `  search requests                  ${searches} (pages included${poll ? `; the poll counted ${poll.searches}` : ''})`,
    );
    console.log(
      poll
        ? `  Items seen / registered          ${poll.seen} / ${registered} (skipped ${poll.skipped}, failed ${poll.failed})`
        : `  Items registered                 ${registered}`,
    );
    console.log(`  imagery.available                ${events.n} (expected ${registered * FIELDS})`);
    console.log(`  poll request → last event        ${toLast.toFixed(1)} s (poll ${pollSeconds.toFixed(1)} s)`);
    console.log(`  Items/s registered               ${(registered / pollSeconds).toFixed(2)}`);
    console.log(
      `  CPU during the poll              ${cpuSeconds.toFixed(1)} s, all threads (${(cpuSeconds / Math.max(1, registered)).toFixed(2)} s per Item registered; load average ${os.loadavg()[0]!.toFixed(1)})`,
    );
    console.log(
      `  bytes read per Item              ${mb(meanRead)} MB mean, ${mb(maxRead)} MB max (whole files ${mb(sceneBytes)} MB)`,
    );
    console.log(
      `  windows needed per Item          ${mb(needed)} MB (headers ${mb(need.headers)} MB, B04/B08/SCL tiles ${mb(need.tiles)} MB) → ${(meanRead / needed).toFixed(2)}×`,
    );
    console.log(
      `  peak RSS during the poll         ${mb(peakRss)} MB (maxrss of the process ${mb(process.resourceUsage().maxRSS * 1024)} MB)`,
    );

    const scale = FIELDS === 1000 && ITEMS === 100 ? '' : ` (run at ${FIELDS} fields / ${ITEMS} Items)`;
    // A stopped poll made only the searches it reached; the backfill poll searched every batch.
    const perPoll = Math.max(searches, backfillSearches);
    console.log(`\ngoal${scale}`);
    console.log(
      `  ≤ ${GOAL_SEARCHES} search requests per poll for 1,000 fields   ${perPoll} (backfill ${backfillSearches}, new Items ${searches}${stopped ? ', stopped' : ''})   ${verdict(perPoll <= GOAL_SEARCHES)}`,
    );
    console.log(
      `  ${ITEMS} Items registered and announced in ≤ ${GOAL_SECONDS} s   ${stopped ? `> ${LIMIT_S} s (${registered} registered)` : `${toLast.toFixed(1)} s`}   ${verdict(!stopped && registered === ITEMS && events.n === ITEMS * FIELDS && toLast <= GOAL_SECONDS)}`,
    );
    console.log(
      `  bytes per Item ≤ ${GOAL_BYTES_RATIO}× the windows needed   ${(meanRead / needed).toFixed(2)}×   ${verdict(meanRead <= GOAL_BYTES_RATIO * needed)}`,
    );
  } finally {
    await app.close();
    await runtime.close(10_000);
    await api.close();
    await range.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
