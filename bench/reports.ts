/**
 * Report generation time, from the POST to `ready` (the client's view, queue idle, embedded
 * database and queue in this process), for every type × format on a 100 ha and a 1,000 ha field
 * with a season of synthetic Sentinel-2 captures (src/imagery/synthetic.ts). Each combination runs
 * BENCH_REPORT_RUNS times (default 5; BENCH_REPORT_TYPES limits the types); "cold" is the first run of a combination (the season's
 * per-capture statistics are cached by the first report that reads them, as in the service), the
 * median and the worst are over all runs. The baseline measured in the same run is
 * one GET /v1/fields/{id}/indices with zonal statistics on the same field (reading a capture
 * window and computing the index): each report's median is printed as a multiple of it.
 * Target: every 100 ha report ready within 2 s of the request, and the prescription files for farm
 * terminals (shp, isoxml as a grid and as treatment zones) on both fields; their last column is
 * their median over the prescription json's (the content they share) in the same run, and the file's size.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../src/app.js';
import { createApiKey, findOrCreateAccount } from '../src/accounts/api-keys.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../src/imagery/synthetic.js';
import { loadConfig } from '../src/platform/config.js';
import { openDatabase } from '../src/platform/database.js';
import { openRuntime } from '../src/runtime.js';

const RUNS = Number(process.env.BENCH_REPORT_RUNS ?? 5);
/** BENCH_REPORT_TYPES=prescription: only those types (comma-separated); default all. */
const ONLY = process.env.BENCH_REPORT_TYPES?.split(',');
const TYPES = ['scouting', 'seasonal', 'health_summary', 'prescription'] as const;
const FORMATS = ['pdf', 'json', 'csv'] as const;
const TARGET_MS = 2000;
/** Every type × format, then the machine formats of prescriptions (each isoxml form). */
const COMBOS: Array<{ type: string; format: string; label: string; options?: Record<string, unknown> }> = [
  ...TYPES.flatMap((type) => FORMATS.map((format) => ({ type, format, label: format }))),
  { type: 'prescription', format: 'shp', label: 'shp' },
  { type: 'prescription', format: 'isoxml', label: 'isoxml grid', options: { isoxml_form: 'grid' } },
  { type: 'prescription', format: 'isoxml', label: 'isoxml zones', options: { isoxml_form: 'zones' } },
];

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export default async function reportsBench(): Promise<void> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'rptbench-'));
  const db = await openDatabase({});
  const config = loadConfig({
    IMAGERY_ROOTS: scratch,
    PUBLIC_BASE_URL: 'http://localhost:3000',
    LOG_LEVEL: 'silent',
    DEMO: 'false',
  });
  const runtime = await openRuntime(config, { db, pollMs: 50, log: () => {} });
  const app = await buildApp(runtime);
  try {
    const account = await findOrCreateAccount(db, 'bench');
    const { key } = await createApiKey(db, account.id);
    const auth = { authorization: `Bearer ${key}` };
    const failures: string[] = [];
    console.log(
      `compute threads ${runtime.compute.size}, ${RUNS} runs per combination, ms from POST to ready (polling every 5 ms)`,
    );
    console.log('field     type            format        cold    median  worst   × baseline  target  × json');
    for (const [label, sceneSize, originX] of [
      ['100 ha', 200, 630_000],
      ['1,000 ha', 632, 640_000],
    ] as const) {
      const dir = path.join(scratch, label.replace(/\W/g, ''));
      const spec = { epsg: 32631, originX, originY: 5_602_000, size: sceneSize, seed: 11 };
      const caps = writeSyntheticSeason(
        dir,
        spec,
        datesEvery('2025-03-26', '2025-10-07', 8),
        '2025-04-10',
        '2025-09-20',
      );
      const f = await app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: auth,
        payload: {
          name: `bench ${label}`,
          boundary: sceneField(spec),
          crop_type: 'maize',
          planting_date: '2025-04-10',
          harvest_date: '2025-09-20',
        },
      });
      const field = f.json();
      for (const c of caps) {
        const res = await app.inject({
          method: 'POST',
          url: '/v1/imagery',
          headers: auth,
          payload: {
            source: 'sentinel-2-l2a',
            capture_date: c.date,
            bands: c.files,
            mask: { href: c.scl, kind: 'scl' },
            offset: -0.1,
          },
        });
        if (res.statusCode !== 201) throw new Error(res.body);
      }
      // Baseline: one index request on the same field (window read + index + statistics), best of 5 after a warm-up.
      const base: number[] = [];
      for (let k = 0; k < 6; k++) {
        const t0 = performance.now();
        const r = await app.inject({
          method: 'GET',
          url: `/v1/fields/${field.id}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false`,
          headers: auth,
        });
        if (r.statusCode !== 200) throw new Error(r.body);
        if (k) base.push(performance.now() - t0);
      }
      const baseline = Math.min(...base);
      console.log(
        `${label.padEnd(9)} baseline: GET indices (zonal stats) ${baseline.toFixed(1)} ms; field ${field.area_ha.toFixed(1)} ha, ${caps.length} captures`,
      );
      let rxJson = 0;
      for (const { type, format, label: fmt, options } of COMBOS.filter((x) => !ONLY || ONLY.includes(x.type))) {
        const times: number[] = [];
        let size = 0;
        for (let run = 0; run < RUNS; run++) {
          const t0 = performance.now();
          const res = await app.inject({
            method: 'POST',
            url: `/v1/fields/${field.id}/reports`,
            headers: auth,
            payload: { type, format, ...(options ? { options } : {}) },
          });
          if (res.statusCode !== 202) throw new Error(res.body);
          const id = res.json().id;
          let status = 'pending';
          let error: string | null = null;
          while (status === 'pending' || status === 'processing') {
            await new Promise((r) => setTimeout(r, 5));
            [{ status, error, size }] = (await db.query<{ status: string; error: string | null; size: number }>(
              'SELECT status, error, size_bytes AS size FROM reports WHERE id = $1',
              [id],
            )) as [{ status: string; error: string | null; size: number }];
          }
          if (status !== 'ready') throw new Error(`${type} ${fmt}: ${error}`);
          times.push(performance.now() - t0);
        }
        const med = median(times);
        const worst = Math.max(...times);
        const machine = format === 'shp' || format === 'isoxml';
        if (type === 'prescription' && format === 'json') rxJson = med;
        const meets = label === '100 ha' || machine ? (worst <= TARGET_MS ? 'ok' : 'MISSED') : '';
        if (meets === 'MISSED') failures.push(`${label} ${type} ${fmt} worst ${worst.toFixed(0)} ms`);
        console.log(
          `${label.padEnd(9)} ${type.padEnd(15)} ${fmt.padEnd(13)} ${times[0]!.toFixed(0).padStart(6)}  ${med.toFixed(0).padStart(6)}  ${worst.toFixed(0).padStart(6)}  ${(med / baseline).toFixed(1).padStart(9)}×  ${meets.padEnd(6)}  ${machine ? `${(med / rxJson).toFixed(2)}×, ${(size / 1024).toFixed(0)} kB` : ''}`,
        );
      }
    }
    console.log(
      failures.length
        ? `target missed (100 ha, and prescription shp/isoxml on both fields, ready within ${TARGET_MS} ms): ${failures.join('; ')}`
        : `target met: every 100 ha report, and the prescription shp/isoxml files on both fields, ready within ${TARGET_MS} ms of the request, cold runs included`,
    );
  } finally {
    await app.close();
    await runtime.close();
    await db.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
