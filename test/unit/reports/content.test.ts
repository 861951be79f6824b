/**
 * Report content (domain code): anomaly zones and scouting points, season phases and area under
 * the curve against the analytic curve, weekly/monthly health periods and trend, options per
 * type, and download link signatures.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/platform/errors.js';
import { buildHealth, linearTrend, periodStarts } from '../../../src/reports/content/health.js';
import type { IndexRaster } from '../../../src/reports/content/raster.js';
import type { Meta } from '../../../src/reports/content/schema.js';
import { buildScouting, findAnomalies } from '../../../src/reports/content/scouting.js';
import { buildSeasonal, NoClearCapture, type Point } from '../../../src/reports/content/seasonal.js';
import { csvRows } from '../../../src/reports/render/csv.js';
import { renderPdf } from '../../../src/reports/render/pdf.js';
import { pdfText, schemaErrors } from '../../helpers/report-files.js';
import { resolveOptions } from '../../../src/reports/options.js';
import { checkDownload, signDownload } from '../../../src/reports/signing.js';
import { toWgs84 } from '../../../src/imagery/crs.js';

const meta = (type: string, index = 'NDVI'): Meta => ({
  report_id: 'rpt_test',
  type,
  title: 't',
  generated_at: '2025-01-01T00:00:00.000Z',
  index,
  field: {
    id: 'fld_t',
    name: 'T',
    crop_type: 'wheat',
    area_ha: 36,
    planting_date: null,
    harvest_date: null,
    centroid: { lon: 4.8, lat: 50.5 },
  },
});

/** 60 × 60 px of 10 m (36 ha), NDVI 0.8 ± a little, with two low blocks of known size and depth. */
function field(): IndexRaster {
  const n = 60;
  const values = new Float32Array(n * n);
  let s = 1;
  for (let k = 0; k < n * n; k++) {
    s = (s * 16807) % 2147483647;
    values[k] = 0.8 + 0.02 * (s / 2147483647 - 0.5);
  }
  for (let j = 10; j < 20; j++) for (let i = 40; i < 52; i++) values[j * n + i] = 0.45; // 120 px = 1.2 ha, deep
  for (let j = 45; j < 50; j++) for (let i = 5; i < 10; i++) values[j * n + i] = 0.7; // 25 px = 0.25 ha, shallow
  values[30 * n + 30] = 0.1; // a single bad pixel: under the minimum area
  return {
    width: n,
    height: n,
    epsg: 32631,
    originX: 630_000,
    originY: 5_602_000,
    resX: 10,
    resY: -10,
    values,
    inside: new Uint8Array(n * n).fill(1),
  };
}

describe('scouting', () => {
  it('finds the low blocks (not the lone pixel), ranks them by area × depth, pins them inside', () => {
    const r = field();
    const { threshold, anomalies, total } = findAnomalies(r, 36);
    // Reference: median and MAD of the same values by a plain sort.
    const v = Array.from(r.values).sort((a, b) => a - b);
    const med = (v[1799]! + v[1800]!) / 2;
    const dev = v.map((x) => Math.abs(x - med)).sort((a, b) => a - b);
    const mad = (dev[1799]! + dev[1800]!) / 2;
    expect(threshold.median).toBeCloseTo(med, 4);
    expect(threshold.mad).toBeCloseTo(mad, 4);
    expect(threshold.value).toBeCloseTo(med - 2 * Math.max(1.4826 * mad, 0.02), 4);
    expect(total).toBe(2);
    // Ground areas: 120 and 25 pixels of 10 m grid, each 100.04 m² on the ground (UTM's scale factor
    // is 0.99981 130 km east of zone 31's central meridian).
    expect(anomalies.map((a) => a.content.area_ha)).toEqual([1.2005, 0.2501]);
    expect(anomalies[0]!.content).toMatchObject({ rank: 1, severity: 'high', share_of_field_pct: 3.33 });
    expect(anomalies[0]!.content.mean).toBeCloseTo(0.45, 5);
    expect(anomalies[1]!.content.severity).toBe('high'); // 0.1 below a median with σ floor 0.02: z = 5
    const [lon, lat] = toWgs84(32631)([630_000 + 46 * 10, 5_602_000 - 15 * 10]);
    expect(Math.abs(anomalies[0]!.content.point.lon - lon)).toBeLessThan(0.0002);
    expect(Math.abs(anomalies[0]!.content.point.lat - lat)).toBeLessThan(0.0002);
    const [i, j] = anomalies[0]!.at;
    expect(i).toBeGreaterThanOrEqual(40);
    expect(i).toBeLessThan(52);
    expect(j).toBeGreaterThanOrEqual(10);
    expect(j).toBeLessThan(20);
  });

  it('status and recommendation follow the anomalies and the change since the previous capture', () => {
    const r = field();
    const capture = { imagery_id: 'img', date: '2025-06-10', source: 'sentinel-2-l2a', usable_fraction: 1 };
    const out = buildScouting({
      meta: meta('scouting'),
      capture,
      raster: r,
      previous: { imagery_id: 'p', date: '2025-06-02', mean: 0.9 },
      colour: { lo: 0.4, hi: 0.9 },
    });
    expect(out.content.status).toBe('action'); // two high-severity areas and a mean drop of ~0.1
    expect(out.content.previous!.change).toBeLessThan(-0.09);
    expect(out.content.recommendation).toMatch(/2 low-NDVI areas cover 1\.45 ha/);
    const flat = field();
    flat.values.fill(0.8);
    const calm = buildScouting({
      meta: meta('scouting'),
      capture,
      raster: flat,
      previous: null,
      colour: { lo: 0.4, hi: 0.9 },
    });
    expect(calm.content.status).toBe('good');
    expect(calm.content.anomalies).toEqual([]);
  });
});

const DAY = 86_400_000;
const iso = (t: number) => new Date(t).toISOString().slice(0, 10);
// A double logistic season: 0.2 bare soil, 0.85 at full canopy; half-amplitude crossings at day 60 and day 150.
const curve = (d: number) => 0.2 + 0.65 / (1 + Math.exp(-(d - 60) / 6)) - 0.65 / (1 + Math.exp(-(d - 150) / 6));
const t0 = Date.parse('2025-04-01T00:00:00Z');

describe('seasonal', () => {
  const points: Point[] = [];
  for (let d = 0; d <= 200; d += 5)
    points.push({
      date: iso(t0 + d * DAY),
      mean: curve(d),
      min: null,
      max: null,
      std: null,
      valid_fraction: 1,
      imagery_id: `img${d}`,
    });
  const s = buildSeasonal(
    meta('seasonal'),
    { start: '2025-04-01', end: iso(t0 + 200 * DAY), basis: 'options' },
    points,
    3,
  );

  it('peak, green-up and senescence against the analytic curve (within 2 days)', () => {
    expect(s.peak.value).toBeCloseTo(curve(105), 3);
    expect(Math.abs(Date.parse(s.peak.date) - (t0 + 105 * DAY)) / DAY).toBeLessThanOrEqual(15);
    expect(Math.abs((Date.parse(s.phases.green_up!) - t0) / DAY - 60)).toBeLessThanOrEqual(2);
    expect(Math.abs((Date.parse(s.phases.senescence!) - t0) / DAY - 150)).toBeLessThanOrEqual(2);
    expect(s.phases.season_length_days).toBeGreaterThanOrEqual(88);
    expect(s.phases.season_length_days).toBeLessThanOrEqual(92);
  });

  it('area under the curve against a fine numerical integral (within 0.5 %); yield potential stated with method and caveats', () => {
    let exact = 0;
    for (let d = 0; d < 200; d += 0.01) exact += curve(d + 0.005) * 0.01;
    expect(Math.abs(s.auc!.index_days - exact) / exact).toBeLessThan(0.005);
    const above = exact - 200 * s.baseline!;
    expect(Math.abs(s.auc!.above_baseline_index_days - above) / above).toBeLessThan(0.01);
    expect(s.yield_potential!.relative).toBeCloseTo(s.auc!.above_baseline_index_days / 80, 3);
    expect(s.yield_potential!.method).toMatch(/integrated/i);
    expect(s.yield_potential!.caveats.length).toBeGreaterThanOrEqual(2);
  });

  it('a full season computes everything: nothing is listed as unavailable', () => {
    expect(s.unavailable).toEqual([]);
    expect(schemaErrors('seasonal', s)).toEqual([]);
  });

  const period = { start: '2025-04-01', end: '2025-10-31', basis: 'options' };
  const items = (c: { unavailable: Array<{ item: string }> }) => c.unavailable.map((u) => u.item);

  it('no clear capture is the one stated failure', () => {
    expect(() => buildSeasonal(meta('seasonal'), period, [], 3)).toThrow(NoClearCapture);
    expect(() => buildSeasonal(meta('seasonal'), period, [], 3)).toThrow(
      'no clear capture of the field between 2025-04-01 and 2025-10-31: the 3 captures of the period had more than 30 % of the field under cloud',
    );
    expect(() => buildSeasonal(meta('seasonal'), period, [], 0)).toThrow(
      'no clear capture of the field between 2025-04-01 and 2025-10-31: no capture of it in the period',
    );
  });

  it('one clear capture: the series and the peak; baseline, amplitude, area, phenology and yield potential are null and said why', () => {
    const one = buildSeasonal(meta('seasonal'), period, [points[20]!], 2);
    expect(one.series).toHaveLength(1);
    expect(one.peak).toEqual({ date: points[20]!.date, value: Math.round(points[20]!.mean * 1e4) / 1e4 });
    expect(one).toMatchObject({
      baseline: null,
      amplitude: null,
      auc: null,
      yield_potential: null,
      phases: { green_up: null, senescence: null, season_length_days: null },
    });
    expect(items(one)).toEqual(['baseline', 'amplitude', 'auc', 'phases', 'yield_potential']);
    for (const u of one.unavailable)
      expect(u.reason).toMatch(/1 clear capture; 2 more were too cloudy over the field to use/);
    expect(schemaErrors('seasonal', one)).toEqual([]);
  });

  it('two or three clear captures: baseline, amplitude and the area under them; phenology and yield potential need 4', () => {
    const three = buildSeasonal(meta('seasonal'), period, [points[30]!, points[10]!, points[20]!], 0);
    expect(three.series.map((p) => p.date)).toEqual([points[10]!.date, points[20]!.date, points[30]!.date]);
    expect(three.peak.date).toBe(points[20]!.date);
    expect(three.baseline).toBeCloseTo(points[10]!.mean, 4);
    expect(three.amplitude).toBeCloseTo(points[20]!.mean - points[10]!.mean, 4);
    // Two trapezoids of 50 days each.
    expect(three.auc!.index_days).toBeCloseTo(25 * (points[10]!.mean + 2 * points[20]!.mean + points[30]!.mean), 3);
    expect(three).toMatchObject({
      yield_potential: null,
      phases: { green_up: null, senescence: null, season_length_days: null },
    });
    expect(items(three)).toEqual(['phases', 'yield_potential']);
    expect(three.unavailable[0]!.reason).toMatch(
      /needs at least 4 clear captures .*the period has 3 clear captures\.$/,
    );
    expect(schemaErrors('seasonal', three)).toEqual([]);
  });

  it('enough captures but a period that ends before senescence: that date and the season length are said to be unobserved', () => {
    const rise = buildSeasonal(meta('seasonal'), { ...period, end: iso(t0 + 100 * DAY) }, points.slice(0, 21), 0);
    expect(rise.phases.green_up).not.toBeNull();
    expect(rise.yield_potential).not.toBeNull();
    expect(items(rise)).toEqual(['phases.senescence', 'phases.season_length_days']);
    expect(rise.unavailable[0]!.reason).toMatch(/^Senescence not observed: .* the decline may lie after 2025-07-10\.$/);
    expect(schemaErrors('seasonal', rise)).toEqual([]);
  });

  it('the CSV lists what was not computed after the series; the PDF says it plainly (a single uniform capture included)', async () => {
    const flat = { ...points[20]!, mean: 0.5, min: 0.5, max: 0.5, std: 0 };
    const one = buildSeasonal(meta('seasonal'), period, [flat], 0);
    const rows = csvRows('seasonal', one);
    expect(rows[0]).toMatchObject({ date: flat.date, mean: 0.5 });
    expect(rows.slice(1).map((r) => r.not_computed)).toEqual(items(one));
    expect(rows.slice(1).every((r) => r.date === undefined && String(r.reason).length > 20)).toBe(true);
    const { text } = await pdfText(await renderPdf('seasonal', one));
    expect(text).toContain('Not computed from these captures');
    expect(text).toContain('Yield potential: The relative yield potential integrates the index over the whole season');
    expect(text).toContain(
      'Green-up, senescence, season length: Green-up, senescence and season length are read where',
    );
  });
});

describe('health summary', () => {
  it('ISO weeks start on Monday; months are calendar months', () => {
    const w = periodStarts('2025-06-04', '2025-06-30', 'weekly');
    expect(w[0]).toEqual({ start: '2025-06-02', end: '2025-06-08' });
    expect(w.at(-1)).toEqual({ start: '2025-06-30', end: '2025-07-06' });
    expect(periodStarts('2025-01-15', '2025-03-02', 'monthly')).toEqual([
      { start: '2025-01-01', end: '2025-01-31' },
      { start: '2025-02-01', end: '2025-02-28' },
      { start: '2025-03-01', end: '2025-03-31' },
    ]);
  });

  it('least squares on an exact line; period means, changes and gaps', () => {
    expect(
      linearTrend([
        { x: 0, y: 1 },
        { x: 10, y: 2 },
        { x: 20, y: 3 },
      ]),
    ).toEqual({ slope: 0.1, r2: 1 });
    const pts: Point[] = ['2025-06-02', '2025-06-05', '2025-06-10', '2025-06-24'].map((d, k) => ({
      date: d,
      mean: 0.5 + 0.01 * k,
      min: 0.4,
      max: 0.6,
      std: 0.01,
      valid_fraction: 1,
      imagery_id: `i${k}`,
    }));
    const h = buildHealth(
      meta('health_summary'),
      { start: '2025-06-02', end: '2025-06-29', granularity: 'weekly' },
      pts,
      [],
    );
    expect(h.periods.map((p) => p.mean)).toEqual([0.505, 0.52, null, 0.53]);
    expect(h.periods.map((p) => p.captures)).toEqual([2, 1, 0, 1]);
    expect(h.periods[1]!.change).toBeCloseTo(0.015, 6);
    expect(h.periods[1]!.change_pct).toBeCloseTo(2.97, 2);
    expect(h.periods[3]!.change).toBeCloseTo(0.01, 6); // against the last week with data
    const days = [0, 3, 8, 22];
    const ref = linearTrend(days.map((x, k) => ({ x, y: 0.5 + 0.01 * k })));
    expect(h.trend.slope_per_30_days).toBeCloseTo(ref.slope * 30, 4);
    expect(h.trend.direction).toBe('improving');
    expect(h.status).toBe('good');
    expect(h.latest).toEqual({ date: '2025-06-24', mean: 0.53, change_vs_previous_period: 0.01 });
  });
});

describe('options per type', () => {
  const issues = (type: Parameters<typeof resolveOptions>[0], o: object) => {
    try {
      resolveOptions(type, o);
      return [];
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      return (e as AppError).errors!.map((i) => `${i.path} ${i.code}`);
    }
  };
  it('defaults and catalogue names', () => {
    expect(resolveOptions('prescription', {}).prescription).toMatchObject({
      input: 'nitrogen',
      base_rate: 150,
      unit: 'kg/ha',
      zones: 4,
      zoning: 'quantiles',
      rate_direction: 'inverse',
      rate_spread: 0.2,
    });
    expect(resolveOptions('prescription', { prescription_input: 'seed_rate' }).prescription).toMatchObject({
      unit: 'seeds/ha',
      base_rate: 80_000,
      rate_direction: 'proportional',
    });
    expect(resolveOptions('prescription', { prescription_input: 'lime' }).prescription).toMatchObject({
      unit: 't/ha',
      base_rate: 2,
    });
    expect(resolveOptions('seasonal', { index: 'evi' }).index).toBe('EVI');
    expect(resolveOptions('health_summary', {}).period).toBe('weekly');
  });
  it('misplaced, unknown and inconsistent options', () => {
    expect(issues('scouting', { zones: 3 })).toEqual(['/body/options/zones not_applicable']);
    expect(issues('seasonal', { index: 'custom' })).toEqual(['/body/options/index unknown_index']);
    expect(issues('seasonal', { start_date: '2025-13-01' })).toEqual(['/body/options/start_date invalid_date']);
    expect(issues('prescription', { prescription_input: 'seed_rate', unit: 'kg/ha', base_rate: 5 })).toEqual([
      '/body/options/unit unit_mismatch',
    ]);
    expect(issues('prescription', { unit: 't/ha' })).toEqual(['/body/options/base_rate required']);
    expect(issues('scouting', { date: '2025-06-01', imagery_id: 'img_x' })).toEqual([
      '/body/options/imagery_id conflict',
    ]);
  });
});

describe('download signatures', () => {
  const key = 'k'.repeat(40);
  it('HMAC-SHA256 over id and expiry; altered id, expiry, key or signature fail; expiry is checked after the signature', () => {
    const exp = 2_000_000_000;
    const sig = signDownload(key, 'rpt_a', exp);
    expect(sig).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(checkDownload(key, 'rpt_a', exp, sig, 1_000)).toBe('ok');
    expect(checkDownload(key, 'rpt_b', exp, sig, 1_000)).toBe('tampered');
    expect(checkDownload(key, 'rpt_a', exp + 1, sig, 1_000)).toBe('tampered');
    expect(checkDownload('x'.repeat(40), 'rpt_a', exp, sig, 1_000)).toBe('tampered');
    expect(checkDownload(key, 'rpt_a', exp, sig.slice(1), 1_000)).toBe('tampered');
    expect(checkDownload(key, 'rpt_a', exp, sig, exp * 1000)).toBe('expired');
  });
});

describe('report options: the cloud mask and the weighting (issue 23)', () => {
  const codes = (o: object) => {
    try {
      resolveOptions('seasonal', o);
      return [];
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      return (e as AppError).errors!.map((i) => `${i.path} ${i.code}`);
    }
  };
  it('accepted on every type, canonical; the defaults leave no trace; bad values are issues', () => {
    expect(
      resolveOptions('scouting', { scl_exclude: [9, 3, 9], cloud_dilation_m: 20, weighting: 'coverage' }),
    ).toMatchObject({
      scl_exclude: [3, 9],
      cloud_dilation_m: 20,
      weighting: 'coverage',
    });
    const plain = resolveOptions('seasonal', {
      scl_exclude: [11, 10, 9, 8, 3, 1, 0],
      cloud_dilation_m: 0,
      weighting: 'centre',
    });
    expect(plain).toEqual(resolveOptions('seasonal', {}));
    expect(codes({ scl_exclude: [3, 12] })).toEqual(['/body/options/scl_exclude unknown_scl_class']);
    expect(codes({ cloud_dilation_m: -1, start_date: '2025-02-30' })).toEqual([
      '/body/options/start_date invalid_date',
      '/body/options/cloud_dilation_m negative_dilation',
    ]);
  });
});
