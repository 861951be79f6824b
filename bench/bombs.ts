/**
 * Hostile GeoTIFFs (src/imagery/hostile-tiffs.ts: 1 GiB per bomb block, as in issue #16) uploaded
 * through POST /v1/imagery/upload, each in a fresh process running the whole service (embedded
 * database, one compute thread, one field over the files' footprint): the answer, the time it
 * took, and the process's RSS before the request and at its peak during it (getrusage maxrss),
 * after a warm-up upload of a normal capture. The last row is a control that must pass: a
 * 10980² Sentinel-2-sized band. BENCH_BOMBS_INFLATE sets the bytes per bomb block,
 * BENCH_BOMBS_ONLY (e.g. `0,3`) runs some rows, BENCH_BOMBS_TIMEOUT_S (300) bounds each process.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../src/app.js';
import { createApiKey, findOrCreateAccount } from '../src/accounts/api-keys.js';
import { hostileTiffs, sentinelSizedBand } from '../src/imagery/hostile-tiffs.js';
import { writeGeoTiff } from '../src/imagery/tiff-writer.js';
import { loadConfig } from '../src/platform/config.js';
import { openDatabase } from '../src/platform/database.js';
import { openRuntime } from '../src/runtime.js';

const INFLATE = Number(process.env.BENCH_BOMBS_INFLATE ?? 2 ** 30);
const ONLY = process.env.BENCH_BOMBS_ONLY?.split(',').map(Number);
const TIMEOUT_S = Number(process.env.BENCH_BOMBS_TIMEOUT_S ?? 300);
const MB = 1_048_576;

function cases(): Array<{ name: string; file: Buffer }> {
  return [...hostileTiffs(INFLATE), { name: 'control: 10980² Sentinel-2 band', code: '', file: sentinelSizedBand() }];
}

interface Row {
  status: number;
  code: string;
  ms: number;
  rssBefore: number;
  peak: number;
}

/** One upload in this process: the service up, a warm-up capture registered, then the file. */
async function child(index: number): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'bombs-'));
  const db = await openDatabase({});
  const config = loadConfig({
    DATA_DIR: path.join(scratch, 'data'),
    PUBLIC_BASE_URL: 'http://localhost:3000',
    LOG_LEVEL: 'silent',
    DEMO: 'false',
    COMPUTE_THREADS: '1',
    RATE_LIMIT_PER_MINUTE: '0',
    SHED_EVENT_LOOP_DELAY_MS: '0',
  });
  const runtime = await openRuntime(config, { db, pollMs: 50, log: () => {} });
  const app = await buildApp(runtime);
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const account = await findOrCreateAccount(db, 'bench');
    const auth = { authorization: `Bearer ${(await createApiKey(db, account.id)).key}` };
    // A field over the files' footprint (UTM 31N, 600 000 / 5 700 000): a registration computes its coverage.
    const boundary = {
      type: 'Polygon',
      coordinates: [
        [
          [4.45, 51.41],
          [4.46, 51.41],
          [4.46, 51.42],
          [4.45, 51.42],
          [4.45, 51.41],
        ],
      ],
    };
    const f = await app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: auth,
      payload: { name: 'bench', boundary },
    });
    if (f.statusCode !== 201) throw new Error(f.body);
    const upload = async (file: Buffer) => {
      const form = new FormData();
      form.append(
        'metadata',
        JSON.stringify({ source: 'sentinel-2-l2a', capture_date: '2025-06-01', bands: { B04: 'red' } }),
      );
      form.append('red', new Blob([file]), 'red.tif');
      const res = await fetch(`${base}/v1/imagery/upload`, { method: 'POST', headers: auth, body: form });
      return { status: res.status, body: (await res.json()) as { errors?: Array<{ code?: string }>; detail?: string } };
    };
    const normal = writeGeoTiff({
      width: 512,
      height: 512,
      data: Uint16Array.from({ length: 512 * 512 }, (_, i) => 500 + (i % 3000)),
      epsg: 32631,
      originX: 600_000,
      originY: 5_700_000,
      resolution: 10,
    });
    const warm = await upload(normal);
    if (warm.status !== 201) throw new Error(JSON.stringify(warm.body));
    const file = cases()[index]!.file;
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    const maxBefore = process.resourceUsage().maxRSS * 1024;
    // The API thread stays free while a worker decodes: sample the RSS, and take the kernel's
    // peak too when the request raised it.
    let sampled = rssBefore;
    const sampler = setInterval(() => (sampled = Math.max(sampled, process.memoryUsage().rss)), 2);
    const t0 = performance.now();
    const { status, body } = await upload(file);
    const ms = performance.now() - t0;
    clearInterval(sampler);
    const maxAfter = process.resourceUsage().maxRSS * 1024;
    const peak = Math.max(sampled, maxAfter > maxBefore ? maxAfter : 0);
    const row: Row = {
      status,
      code: body.errors?.[0]?.code ?? (status === 201 ? 'registered' : (body.detail ?? '').slice(0, 60)),
      ms,
      rssBefore,
      peak,
    };
    console.log(JSON.stringify(row));
  } finally {
    await app.close();
    await runtime.close();
    await db.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

export default async function bombsBench(): Promise<void> {
  const all = cases();
  const self = fileURLToPath(import.meta.url);
  console.log(
    `${all.length} files, each uploaded by a fresh service process (1 compute thread); bomb blocks decode to ${(INFLATE / MB).toFixed(0)} MiB`,
  );
  const rows: Array<Record<string, string>> = [];
  all.forEach((c, k) => {
    if (ONLY && !ONLY.includes(k)) return;
    let row: Row | undefined;
    let failure = '';
    try {
      const out = execFileSync(process.execPath, ['--expose-gc', self, '--child', String(k)], {
        encoding: 'utf8',
        timeout: TIMEOUT_S * 1000,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      row = JSON.parse(out.trim().split('\n').pop()!) as Row;
    } catch (err) {
      const e = err as { signal?: string; status?: number; stderr?: string };
      failure = e.signal
        ? `no answer within ${TIMEOUT_S} s (process included)`
        : `process died (exit ${e.status}): ${(e.stderr ?? '').trim().split('\n').pop()?.slice(0, 80)}`;
    }
    rows.push({
      file: c.name,
      'file KB': (c.file.length / 1024).toFixed(0),
      answer: row ? `${row.status} ${row.code}` : failure,
      ms: row ? row.ms.toFixed(0) : '',
      'RSS before MB': row ? (row.rssBefore / MB).toFixed(0) : '',
      'peak RSS MB': row ? (row.peak / MB).toFixed(0) : '',
      'growth MB': row ? (Math.max(0, row.peak - row.rssBefore) / MB).toFixed(0) : '',
    });
  });
  console.table(rows);
}

if (process.argv[2] === '--child') {
  child(Number(process.argv[3])).then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
