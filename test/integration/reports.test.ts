/**
 * Reports through HTTP on every queue backend (embedded queue on PGlite; the database queue on
 * PostgreSQL and BullMQ on Redis when configured): the twelve type × format files read back as a
 * client would (PDF text, CSV with its header, JSON against its schema), prescription areas and
 * rates, the state machine and report.ready, failures, Idempotency-Key, signed links, delete,
 * filters and pagination.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { CSV_HEADERS } from '../../src/reports/render/csv.js';
import { signDownload } from '../../src/reports/signing.js';
import { buildServiceApp, queueBackends, square, type TestApp } from '../helpers/app.js';
import { parseCsv, pdfText, schemaErrors } from '../helpers/report-files.js';
import { seedSeason, waitReport, type SeededField } from '../helpers/reports.js';
import { checkRanges } from '../helpers/ranges.js';

const TYPES = ['scouting', 'seasonal', 'health_summary', 'prescription'] as const;
const FORMATS = ['pdf', 'json', 'csv'] as const;
const SIGNING_KEY = 'test-signing-key-0123456789abcdef0123';

describe.each(queueBackends)('reports on $name', (backend) => {
  let t: TestApp;
  let dir: string;
  let seeded: SeededField;
  const post = (fieldId: string, payload: object, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: `/v1/fields/${fieldId}/reports`,
      headers: { ...t.auth(), ...headers },
      payload,
    });
  const download = (url: string) => {
    const u = new URL(url);
    return t.app.inject({ method: 'GET', url: u.pathname + u.search });
  };
  async function ready(payload: object, fieldId = seeded.fieldId) {
    const res = await post(fieldId, payload);
    expect(res.statusCode, res.body).toBe(202);
    const r = await waitReport(t, res.json().id);
    expect(r.status, r.error).toBe('ready');
    return r;
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'reports-'));
    t = await buildServiceApp(backend, { env: { IMAGERY_ROOTS: dir } });
    seeded = await seedSeason(t, dir);
  }, 180_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('options scl_exclude, cloud_dilation_m and weighting: the series follows the mask (issue 23)', async () => {
    const metas: Array<Record<string, unknown>> = [];
    const series = async (options: object) => {
      const content = (
        await download((await ready({ type: 'seasonal', format: 'json', options })).download_url)
      ).json();
      expect(schemaErrors('seasonal', content)).toEqual([]);
      metas.push(content.meta);
      return content.series as Array<{ imagery_id: string; mean: number; valid_fraction: number }>;
    };
    const plain = await series({});
    const wide = await series({ cloud_dilation_m: 60 });
    const cov = await series({ weighting: 'coverage', scl_exclude: [0, 1, 3, 8, 9, 10, 11] });
    // the file says which mask and weighting its numbers follow, those not the defaults
    expect(metas.map((m) => m.statistics_options)).toEqual([
      undefined,
      { cloud_dilation_m: 60 },
      { weighting: 'coverage' },
    ]);
    const pdf = await ready({
      type: 'scouting',
      format: 'pdf',
      options: { date: '2025-07-01', weighting: 'coverage', scl_exclude: [9, 3], cloud_dilation_m: 20 },
    });
    const { text } = await pdfText((await download(pdf.download_url)).rawPayload);
    expect(text).toContain(
      'Pixels weighted by their area inside the field; SCL classes 3, 9 excluded; 20 m around clouds and shadows excluded',
    );
    // a dilation of 60 m takes the partly cloudy captures past the report's 30 % cloud cover: fewer points
    const byId = new Map(plain.map((p) => [p.imagery_id, p]));
    for (const p of wide) expect(p.valid_fraction).toBeLessThanOrEqual(byId.get(p.imagery_id)!.valid_fraction);
    expect(wide.length).toBeGreaterThan(0);
    expect(wide.length).toBeLessThan(plain.length);
    // the synthetic field's edges lie on pixel edges: coverage weights are 0 or 1, the centre rule's numbers
    expect(cov).toEqual(plain);
    for (const [options, code] of [
      [{ scl_exclude: [13] }, 'unknown_scl_class'],
      [{ scl_exclude: [-1, 3] }, 'unknown_scl_class'],
      [{ cloud_dilation_m: -5 }, 'negative_dilation'],
      [{ cloud_dilation_m: 1001 }, 'dilation_too_large'],
    ] as const) {
      const bad = await post(seeded.fieldId, { type: 'seasonal', format: 'json', options });
      expect(bad.statusCode, JSON.stringify(options)).toBe(400);
      expect(bad.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(bad.json().errors[0].code, JSON.stringify(options)).toBe(code);
    }
  });

  describe.each(TYPES)('%s', (type) => {
    const contents: Record<string, any> = {};
    it.each(FORMATS)(
      `${type} as %s: the file opens and carries the report`,
      async (format) => {
        const r = await ready({
          type,
          format,
          options: type === 'scouting' || type === 'prescription' ? { date: '2025-07-01' } : {},
        });
        expect(r).toMatchObject({ field_id: seeded.fieldId, type, format, status: 'ready', error: null });
        expect(Date.parse(r.expires_at) - Date.now()).toBeGreaterThan(7 * 86_400_000 - 120_000);
        expect(Date.parse(r.expires_at) - Date.now()).toBeLessThanOrEqual(7 * 86_400_000);
        const file = await download(r.download_url);
        expect(file.statusCode).toBe(200);
        expect(file.headers['content-type']).toBe(
          { pdf: 'application/pdf', json: 'application/json', csv: 'text/csv; charset=utf-8' }[format],
        );
        expect(file.headers['content-disposition']).toMatch(
          new RegExp(`^attachment; filename="${type}_synthetic-maize_\\d{4}-\\d{2}-\\d{2}_${r.id}\\.${format}"$`),
        );
        expect(Number(file.headers['content-length'])).toBe(file.rawPayload.length);
        if (format === 'json') {
          const c = file.json();
          expect(schemaErrors(type, c)).toEqual([]);
          expect(c.meta).toMatchObject({
            report_id: r.id,
            type,
            index: 'NDVI',
            field: { id: seeded.fieldId, name: 'Synthetic maize', crop_type: 'maize' },
          });
          contents[type] = c;
        } else if (format === 'csv') {
          const { headers, rows } = await parseCsv(file.body);
          expect(headers).toEqual(CSV_HEADERS[type]);
          if (type === 'seasonal') {
            expect(rows.length).toBeGreaterThanOrEqual(4);
            for (const row of rows) {
              expect(row.date).toMatch(/^2025-\d{2}-\d{2}$/);
              expect(Number(row.mean)).toBeGreaterThan(0);
            }
          }
          if (type === 'health_summary') expect(rows.length).toBe(12);
          if (type === 'prescription') {
            expect(rows.length).toBe(4);
            expect(rows.map((x) => Number(x.zone))).toEqual([1, 2, 3, 4]);
            for (const row of rows) expect(row.wkt).toMatch(/^MULTIPOLYGON \(\(\(/);
          }
          if (type === 'scouting') {
            expect(rows.length).toBeGreaterThanOrEqual(1);
            for (const row of rows) {
              expect(Math.abs(Number(row.lon) - 4.84)).toBeLessThan(0.05);
              expect(Math.abs(Number(row.lat) - 50.55)).toBeLessThan(0.05);
              expect(['high', 'moderate', 'low']).toContain(row.severity);
            }
          }
        } else {
          expect(file.rawPayload.subarray(0, 5).toString()).toBe('%PDF-');
          const { text, pages } = await pdfText(file.rawPayload);
          expect(pages).toBeGreaterThanOrEqual(1);
          expect(text).toContain('Synthetic maize');
          expect(text).toContain(r.id);
          const expected = {
            scouting: [
              'Scouting report',
              'NDVI map and scouting points',
              'Problem areas to visit',
              'Latitude',
              'cloud / no data',
            ],
            seasonal: [
              'Seasonal analysis',
              'NDVI over the season',
              'Yield potential',
              'Green-up'.toUpperCase(),
              'Clear captures',
            ],
            health_summary: ['Weekly health summary', 'Weekly mean NDVI', 'Periods', 'Alert history'],
            prescription: [
              'Prescription map - Nitrogen (N)',
              'Management zones',
              'Zones and rates',
              'Rate (kg/ha)',
              'Zone 1',
            ],
          }[type];
          for (const s of expected) expect(text).toContain(s);
        }
      },
      60_000,
    );
  });

  it('prescription: zone areas add up to the field area within 1 %; rates follow the zones; product = Σ rate × area', async () => {
    const cases = [
      { options: { date: '2025-07-01', prescription_input: 'nitrogen', zones: 4 }, direction: 'inverse' },
      {
        options: { date: '2025-07-01', prescription_input: 'seed_rate', zones: 3, zoning: 'kmeans' },
        direction: 'proportional',
      },
      {
        options: { date: '2025-07-01', prescription_input: 'lime', zones: 7, base_rate: 3, rate_spread: 0.3 },
        direction: 'inverse',
      },
      {
        options: {
          date: '2025-07-01',
          prescription_input: 'potassium',
          zones: 2,
          rate_direction: 'proportional',
          unit: 'l/ha',
          base_rate: 100,
        },
        direction: 'proportional',
      },
    ];
    for (const c of cases) {
      const r = await ready({ type: 'prescription', format: 'json', options: c.options });
      const p = (await download(r.download_url)).json();
      expect(schemaErrors('prescription', p)).toEqual([]);
      const sum = p.zones.reduce((s: number, z: any) => s + z.area_ha, 0);
      expect(Math.abs(sum - seeded.areaHa) / seeded.areaHa, JSON.stringify(c)).toBeLessThan(0.01);
      expect(p.zones.length).toBe(c.options.zones);
      expect(p.rate_direction).toBe(c.direction);
      for (let k = 1; k < p.zones.length; k++) {
        expect(p.zones[k].mean_index).toBeGreaterThan(p.zones[k - 1].mean_index);
        if (c.direction === 'inverse') expect(p.zones[k].rate).toBeLessThan(p.zones[k - 1].rate);
        else expect(p.zones[k].rate).toBeGreaterThan(p.zones[k - 1].rate);
      }
      const product = p.zones.reduce((s: number, z: any) => s + z.rate * z.area_ha, 0);
      expect(Math.abs(p.totals.product_total - product)).toBeLessThan(0.05);
      // The area-weighted average stays at the base rate (within rounding of the rates).
      expect(Math.abs(p.totals.average_rate - p.base_rate) / p.base_rate).toBeLessThan(0.02);
      const spread = p.rate_spread;
      for (const z of p.zones) expect(Math.abs(z.rate / p.base_rate - 1)).toBeLessThanOrEqual(spread + 0.01);
      for (const z of p.zones)
        for (const poly of z.geometry.coordinates) for (const ring of poly) expect(ring[0]).toEqual(ring.at(-1));
    }
  }, 120_000);

  it('report.ready carries exactly the spec data, matching GET; metrics count it', async () => {
    const r = await ready({ type: 'seasonal', format: 'json' });
    const events = (await listOutbox(t.db, t.accountId, 'report.ready')).filter((e) => e.data.report_id === r.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toEqual({
      field_id: seeded.fieldId,
      report_id: r.id,
      type: 'seasonal',
      format: 'json',
      download_url: r.download_url,
      expires_at: r.expires_at,
    });
    const m = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(m).toMatch(/reports_generated_total\{type="seasonal",format="json",outcome="ready"\} [1-9]/);
    expect(m).toMatch(/report_generation_duration_seconds_count\{type="seasonal",format="json"\} [1-9]/);
  });

  it('POST answers 202 pending; a report goes pending → processing → ready and is listed with its state', async () => {
    const res = await post(seeded.fieldId, { type: 'scouting', format: 'json' });
    expect(res.statusCode).toBe(202);
    const body = res.json();
    expect(body).toMatchObject({
      id: expect.stringMatching(/^rpt_[A-Za-z0-9_-]{22}$/),
      status: 'pending',
      download_url: null,
      expires_at: null,
      field_id: seeded.fieldId,
    });
    expect(res.headers.location).toBe(`http://localhost:3000/v1/reports/${body.id}`);
    const seen = new Set<string>();
    const end = Date.now() + 30_000;
    for (;;) {
      const [row] = await t.db.query<{ status: string }>('SELECT status FROM reports WHERE id = $1', [body.id]);
      seen.add(row!.status);
      if (row!.status === 'ready' || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    expect([...seen].filter((s) => s !== 'pending' && s !== 'processing')).toEqual(['ready']);
    const [row] = await t.db.query<{ attempts: number; started_at: Date; completed_at: Date }>(
      'SELECT attempts, started_at, completed_at FROM reports WHERE id = $1',
      [body.id],
    );
    expect(row!.attempts).toBe(1);
    expect(row!.completed_at.getTime()).toBeGreaterThanOrEqual(row!.started_at.getTime());
  });

  it('fails with a reason: no imagery, nothing clear in the period', async () => {
    const bare = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'bare', boundary: square(10, 45) },
      })
    ).json();
    const a = await waitReport(t, (await post(bare.id, { type: 'scouting', format: 'pdf' })).json().id);
    expect(a.status).toBe('failed');
    expect(a.error).toMatch(/no imagery/i);
    expect(a.download_url).toBeNull();
    const b = await waitReport(
      t,
      (
        await post(seeded.fieldId, {
          type: 'health_summary',
          format: 'csv',
          options: { start_date: '2024-01-01', end_date: '2024-03-01' },
        })
      ).json().id,
    );
    expect(b.status).toBe('failed');
    expect(b.error).toMatch(/no clear capture of the field between 2024-01-01 and 2024-03-01/);
    const m = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(m).toMatch(/reports_generated_total\{type="scouting",format="pdf",outcome="failed"\} [1-9]/);
  });

  it('a season with few clear captures is reported with what they allow and says what was not computed and why (JSON, CSV, PDF); none at all fails', async () => {
    const options = { start_date: '2025-06-01', end_date: '2025-06-20' }; // captures of 6 and 14 June
    const json = (await download((await ready({ type: 'seasonal', format: 'json', options })).download_url)).json();
    expect(schemaErrors('seasonal', json)).toEqual([]);
    const served = (
      await t.app.inject({ method: 'GET', url: '/v1/reports/schemas/seasonal', headers: t.auth() })
    ).json();
    expect(served.required).toContain('unavailable');
    expect(served.properties.yield_potential.anyOf.map((x: { type?: string }) => x.type)).toContain('null');
    expect(json.series.length).toBeGreaterThanOrEqual(1);
    expect(json.series.length).toBeLessThan(4);
    expect(json).toMatchObject({
      yield_potential: null,
      phases: { green_up: null, senescence: null, season_length_days: null },
    });
    const items = json.unavailable.map((u: { item: string }) => u.item);
    expect(items).toEqual(expect.arrayContaining(['phases', 'yield_potential']));
    expect(json.unavailable.find((u: { item: string }) => u.item === 'phases').reason).toMatch(
      new RegExp(
        `needs at least 4 clear captures spread over the season; the period has ${json.series.length} clear capture`,
      ),
    );
    const { headers, rows } = await parseCsv(
      (await download((await ready({ type: 'seasonal', format: 'csv', options })).download_url)).body,
    );
    expect(headers).toEqual(CSV_HEADERS.seasonal);
    expect(rows.filter((r) => r.date).length).toBe(json.series.length);
    expect(rows.filter((r) => !r.date).map((r) => r.not_computed)).toEqual(items);
    for (const r of rows.filter((x) => !x.date)) expect(r.reason.length).toBeGreaterThan(20);
    const { text } = await pdfText(
      (await download((await ready({ type: 'seasonal', format: 'pdf', options })).download_url)).rawPayload,
    );
    expect(text).toContain('Not computed from these captures');
    expect(text).toContain('Yield potential: The relative yield potential integrates the index over the whole season');
    // No clear capture at all: the one failure, saying why.
    const none = await waitReport(
      t,
      (
        await post(seeded.fieldId, {
          type: 'seasonal',
          format: 'json',
          options: { start_date: '2024-01-01', end_date: '2024-03-01' },
        })
      ).json().id,
    );
    expect(none).toMatchObject({
      status: 'failed',
      error: 'no clear capture of the field between 2024-01-01 and 2024-03-01: no capture of it in the period',
    });
    const cloudy = await waitReport(
      t,
      (
        await post(seeded.fieldId, {
          type: 'seasonal',
          format: 'pdf',
          options: { start_date: '2025-05-04', end_date: '2025-05-06' },
        })
      ).json().id,
    ); // 5 May: 80 % cloud
    expect(cloudy).toMatchObject({
      status: 'failed',
      error:
        'no clear capture of the field between 2025-05-04 and 2025-05-06: the 1 capture of the period had more than 30 % of the field under cloud',
    });
  }, 60_000);

  it('rejects bad requests with problem+json: type, format, options per type, unknown field', async () => {
    const bad: Array<[object, string]> = [
      [{ type: 'yearly', format: 'pdf' }, '/body/type'],
      [{ type: 'scouting', format: 'docx' }, '/body/format'],
      [{ type: 'scouting' }, '/body/format'],
      [{ type: 'prescription', format: 'pdf', options: { zones: 8 } }, '/body/options/zones'],
      [{ type: 'prescription', format: 'pdf', options: { zones: 1 } }, '/body/options/zones'],
      [
        { type: 'prescription', format: 'pdf', options: { prescription_input: 'sulphur' } },
        '/body/options/prescription_input',
      ],
      [{ type: 'prescription', format: 'pdf', options: { base_rate: -5 } }, '/body/options/base_rate'],
      [{ type: 'prescription', format: 'pdf', options: { unit: 'gal/ac' } }, '/body/options/unit'],
      [
        { type: 'prescription', format: 'pdf', options: { prescription_input: 'nitrogen', unit: 'seeds/ha' } },
        '/body/options/unit',
      ],
      [{ type: 'prescription', format: 'pdf', options: { unit: 'l/ha' } }, '/body/options/base_rate'],
      [
        { type: 'scouting', format: 'pdf', options: { prescription_input: 'nitrogen' } },
        '/body/options/prescription_input',
      ],
      [{ type: 'scouting', format: 'pdf', options: { start_date: '2025-01-01' } }, '/body/options/start_date'],
      [{ type: 'seasonal', format: 'pdf', options: { index: 'XYZ' } }, '/body/options/index'],
      [{ type: 'seasonal', format: 'pdf', options: { start_date: '2025-02-30' } }, '/body/options/start_date'],
      [
        { type: 'seasonal', format: 'pdf', options: { start_date: '2025-06-01', end_date: '2025-05-01' } },
        '/body/options/end_date',
      ],
      [{ type: 'seasonal', format: 'pdf', options: { colour: 'red' } }, '/body/options/colour'],
      [{ type: 'health_summary', format: 'pdf', options: { period: 'daily' } }, '/body/options/period'],
    ];
    for (const [payload, where] of bad) {
      const res = await post(seeded.fieldId, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().code).toBe('validation_failed');
      expect(
        res.json().errors.map((e: any) => e.path),
        JSON.stringify(payload),
      ).toContain(where);
    }
    expect((await post('fld_nope', { type: 'scouting', format: 'pdf' })).statusCode).toBe(404);
    const other = await t.otherAccount();
    const theirs = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${seeded.fieldId}/reports`,
      headers: t.auth(other.key),
      payload: { type: 'scouting', format: 'pdf' },
    });
    expect(theirs.statusCode).toBe(404);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: `/v1/fields/${seeded.fieldId}/reports`,
          payload: { type: 'scouting', format: 'pdf' },
        })
      ).statusCode,
    ).toBe(401);
    const ok = await post(seeded.fieldId, {
      type: 'health_summary',
      format: 'json',
      options: { index: 'ndre', period: 'monthly' },
    });
    expect(ok.statusCode).toBe(202);
    expect(ok.json().options).toMatchObject({ index: 'NDRE', period: 'monthly' });
  });

  it('Idempotency-Key: same key and body → the same report; another body → 422; concurrent retries make one report', async () => {
    const key = `k-${Date.now()}`;
    const body = { type: 'seasonal', format: 'csv', options: { index: 'NDVI' } };
    const first = await post(seeded.fieldId, body, { 'idempotency-key': key });
    const again = await post(
      seeded.fieldId,
      { format: 'csv', options: { index: 'NDVI' }, type: 'seasonal' },
      { 'idempotency-key': key },
    );
    expect(first.statusCode).toBe(202);
    expect(again.statusCode).toBe(202);
    expect(again.json().id).toBe(first.json().id);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const other = await post(seeded.fieldId, { ...body, format: 'json' }, { 'idempotency-key': key });
    expect(other.statusCode).toBe(422);
    expect(other.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(other.json().code).toBe('idempotency_key_reused');
    const key2 = `c-${Date.now()}`;
    const burst = await Promise.all(
      Array.from({ length: 5 }, () => post(seeded.fieldId, body, { 'idempotency-key': key2 })),
    );
    expect(burst.map((r) => r.statusCode)).toEqual([202, 202, 202, 202, 202]);
    expect(new Set(burst.map((r) => r.json().id)).size).toBe(1);
    // Older than 24 h: the key is free again.
    await t.db.query(`UPDATE report_idempotency SET created_at = now() - interval '25 hours' WHERE key = $1`, [key]);
    const later = await post(seeded.fieldId, body, { 'idempotency-key': key });
    expect(later.statusCode).toBe(202);
    expect(later.json().id).not.toBe(first.json().id);
    expect((await post(seeded.fieldId, body, { 'idempotency-key': 'é' })).statusCode).toBe(400);
  });

  it('a report file in byte ranges (a PDF: starts across it, a range of 1,000 bytes)', async () => {
    const r = await ready({ type: 'scouting', format: 'pdf' });
    const size = (await download(r.download_url)).rawPayload.length;
    expect(size).toBeGreaterThan(2000);
    const starts = [0, 1, 2, 999, 1000, 1001, size - 1001, size - 2, size - 1];
    for (let s = 0; s < size; s += Math.ceil(size / 40)) starts.push(s);
    await checkRanges(t, r.download_url, starts, 1000);
  });

  it('signed links: no key needed; tampered → 403; expired → 403; the list and GET re-sign for another 7 days and keep it', async () => {
    const r = await ready({ type: 'scouting', format: 'csv' });
    const u = new URL(r.download_url);
    expect(u.origin + u.pathname).toBe(`http://localhost:3000/v1/reports/${r.id}/download`);
    expect((await download(r.download_url)).statusCode).toBe(200);
    const sig = u.searchParams.get('signature')!;
    const exp = Number(u.searchParams.get('expires'));
    expect(exp * 1000).toBe(Date.parse(r.expires_at));
    const tampered = [
      `${u.pathname}?expires=${exp + 3600}&signature=${sig}`,
      `${u.pathname}?expires=${exp}&signature=${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`,
      `${u.pathname}?expires=${exp}`,
      `${u.pathname}`,
      `${u.pathname}?expires=abc&signature=${sig}`,
      `/v1/reports/rpt_${'x'.repeat(22)}/download?expires=${exp}&signature=${sig}`,
    ];
    for (const url of tampered) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(403);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().code).toBe('invalid_signature');
    }
    const past = Math.floor(Date.now() / 1000) - 60;
    const expired = await t.app.inject({
      method: 'GET',
      url: `${u.pathname}?expires=${past}&signature=${signDownload(SIGNING_KEY, r.id, past)}`,
    });
    expect(expired.statusCode).toBe(403);
    expect(expired.json().code).toBe('link_expired');
    // The stored link expires: GET /v1/reports lists a fresh one for another 7 days, persisted.
    const fresh7d = (x: any) => {
      expect(x.status).toBe('ready');
      expect(Math.abs(Date.parse(x.expires_at) - (Date.now() + 7 * 86_400_000))).toBeLessThan(60_000);
      expect(Number(new URL(x.download_url).searchParams.get('expires')) * 1000).toBe(Date.parse(x.expires_at));
    };
    const list = async () =>
      (
        await t.app.inject({
          method: 'GET',
          url: `/v1/reports?field_id=${seeded.fieldId}&per_page=100`,
          headers: t.auth(),
        })
      ).json().data;
    const r2 = await ready({ type: 'scouting', format: 'json' });
    await t.db.query(`UPDATE reports SET expires_at = now() - interval '1 second' WHERE id = ANY($1)`, [[r.id, r2.id]]);
    const listed = await list();
    for (const id of [r.id, r2.id]) {
      const x = listed.find((y: any) => y.id === id);
      fresh7d(x);
      expect((await download(x.download_url)).statusCode).toBe(200);
      expect(
        (await t.app.inject({ method: 'GET', url: `/v1/reports/${id}`, headers: t.auth() })).json().download_url,
      ).toBe(x.download_url);
    }
    // The same through GET /v1/reports/{id}.
    await t.db.query(`UPDATE reports SET expires_at = now() - interval '1 second' WHERE id = $1`, [r.id]);
    const fresh = (await t.app.inject({ method: 'GET', url: `/v1/reports/${r.id}`, headers: t.auth() })).json();
    fresh7d(fresh);
    expect((await download(fresh.download_url)).statusCode).toBe(200);
    const again = (await t.app.inject({ method: 'GET', url: `/v1/reports/${r.id}`, headers: t.auth() })).json();
    expect(again.expires_at).toBe(fresh.expires_at);
    const [row] = await t.db.query<{ expires_at: Date }>('SELECT expires_at FROM reports WHERE id = $1', [r.id]);
    expect(row!.expires_at.toISOString()).toBe(fresh.expires_at);
  });

  it('DELETE → 204, then the report and its file are gone', async () => {
    const r = await ready({ type: 'health_summary', format: 'pdf' });
    const other = await t.otherAccount();
    expect(
      (await t.app.inject({ method: 'DELETE', url: `/v1/reports/${r.id}`, headers: t.auth(other.key) })).statusCode,
    ).toBe(404);
    expect(
      (await t.app.inject({ method: 'GET', url: `/v1/reports/${r.id}`, headers: t.auth(other.key) })).statusCode,
    ).toBe(404);
    const del = await t.app.inject({ method: 'DELETE', url: `/v1/reports/${r.id}`, headers: t.auth() });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await t.app.inject({ method: 'GET', url: `/v1/reports/${r.id}`, headers: t.auth() })).statusCode).toBe(404);
    expect((await download(r.download_url)).statusCode).toBe(404);
    expect(await t.db.query('SELECT 1 FROM report_files WHERE report_id = $1', [r.id])).toHaveLength(0);
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/reports/${r.id}`, headers: t.auth() })).statusCode).toBe(
      404,
    );
    // Deleting a pending report: its job finds nothing and makes nothing.
    const p = (await post(seeded.fieldId, { type: 'seasonal', format: 'pdf' })).json();
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/reports/${p.id}`, headers: t.auth() })).statusCode).toBe(
      204,
    );
    await new Promise((res) => setTimeout(res, 500));
    expect(await t.db.query('SELECT 1 FROM reports WHERE id = $1', [p.id])).toHaveLength(0);
    expect(await t.db.query('SELECT 1 FROM report_files WHERE report_id = $1', [p.id])).toHaveLength(0);
  });

  it('GET /v1/reports: filters by field, type and status; page envelope and Link header; per_page above 100 is 400', async () => {
    const f2 = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'f2', boundary: square(11, 46) },
      })
    ).json();
    const made = [];
    for (let k = 0; k < 5; k++)
      made.push((await post(f2.id, { type: k % 2 ? 'seasonal' : 'scouting', format: 'json' })).json().id);
    for (const id of made) await waitReport(t, id);
    const q = async (qs: string) => t.app.inject({ method: 'GET', url: `/v1/reports?${qs}`, headers: t.auth() });
    const all = (await q(`field_id=${f2.id}`)).json();
    expect(all).toMatchObject({ page: 1, per_page: 20, total: 5, total_pages: 1 });
    expect(all.data.map((r: any) => r.id).sort()).toEqual([...made].sort());
    expect((await q(`field_id=${f2.id}&type=seasonal`)).json().total).toBe(2);
    expect((await q(`field_id=${f2.id}&type=scouting&status=failed`)).json().total).toBe(3);
    expect((await q(`field_id=${f2.id}&status=ready`)).json().total).toBe(0);
    const p2 = await q(`field_id=${f2.id}&per_page=2&page=2`);
    expect(p2.json()).toMatchObject({ page: 2, per_page: 2, total: 5, total_pages: 3 });
    expect(p2.json().data).toHaveLength(2);
    const link = p2.headers.link as string;
    expect(link).toContain('rel="next"');
    expect(link).toContain('rel="prev"');
    expect(link).toContain(`field_id=${f2.id}`);
    expect(link).toContain('page=3&per_page=2');
    expect((await q(`field_id=${f2.id}&per_page=2&page=9`)).json().data).toEqual([]);
    for (const bad of ['per_page=101', 'per_page=0', 'page=0', 'type=weekly', 'status=done']) {
      const res = await q(bad);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code).toBe('validation_failed');
    }
    const other = await t.otherAccount();
    expect(
      (await t.app.inject({ method: 'GET', url: `/v1/reports?field_id=${f2.id}`, headers: t.auth(other.key) })).json()
        .total,
    ).toBe(0);
  });

  it("health summary lists the alerts triggered by the period's captures", async () => {
    const rule = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${seeded.fieldId}/alerts`,
      headers: t.auth(),
      payload: { alert_type: 'crop_health', index: 'NDVI', operator: 'below', threshold: 0.8 },
    });
    expect(rule.statusCode).toBe(201);
    // Rules are judged on new captures: register the clear capture of 6 June again.
    const bands = Object.fromEntries(
      ['B02', 'B03', 'B04', 'B05', 'B08', 'B11', 'B12'].map((b) => [b, path.join(dir, `2025-06-06_${b}.tif`)]),
    );
    const img = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: {
        source: 'sentinel-2-l2a',
        capture_date: '2025-06-06',
        bands,
        mask: { href: path.join(dir, '2025-06-06_SCL.tif'), kind: 'scl' },
        offset: -0.1,
      },
    });
    expect(img.statusCode, img.body).toBe(201);
    const r = await ready({
      type: 'health_summary',
      format: 'json',
      options: { start_date: '2025-06-01', end_date: '2025-06-30' },
    });
    const h = (await download(r.download_url)).json();
    expect(schemaErrors('health_summary', h)).toEqual([]);
    expect(h.alerts).toHaveLength(1);
    expect(h.alerts[0]).toMatchObject({
      capture_date: '2025-06-06',
      alert_type: 'crop_health',
      index: 'NDVI',
      threshold: 0.8,
      imagery_id: img.json().id,
    });
    expect(h.alerts[0].value).toBeLessThan(0.8);
    expect(h.summary).toMatch(/1 alert triggered/);
    const outside = await ready({
      type: 'health_summary',
      format: 'json',
      options: { start_date: '2025-07-01', end_date: '2025-07-31' },
    });
    expect((await download(outside.download_url)).json().alerts).toEqual([]);
    const pdf = await ready({
      type: 'health_summary',
      format: 'pdf',
      options: { start_date: '2025-06-01', end_date: '2025-06-30' },
    });
    const { text } = await pdfText((await download(pdf.download_url)).rawPayload);
    expect(text).toContain('Alert history');
    expect(text).toContain('6 Jun 2025 crop health NDVI');
  });

  it('serves the JSON Schema of each type', async () => {
    for (const type of TYPES) {
      const res = await t.app.inject({ method: 'GET', url: `/v1/reports/schemas/${type}`, headers: t.auth() });
      expect(res.statusCode).toBe(200);
      expect(res.json().$id).toBe(type);
    }
  });
});
