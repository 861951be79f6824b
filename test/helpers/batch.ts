/** Batch statistics in tests: polygons inside a synthetic scene, waiting for a job, reading its file. */
import { toWgs84 } from '../../src/imagery/crs.js';
import { parseCsv } from './report-files.js';
import type { TestApp } from './app.js';

export interface Scene {
  epsg: number;
  originX: number;
  originY: number;
  size: number;
}

/**
 * A quadrilateral of about `w` × `h` metres at (x, y) metres from the scene's top-left corner,
 * its corners nudged so that its edges are not on pixel edges, in WGS84.
 */
export function parcel(scene: Scene, x: number, y: number, w: number, h: number, nudge = 3.7) {
  const inv = toWgs84(scene.epsg);
  const X = scene.originX + x;
  const Y = scene.originY - y;
  const ring = [inv([X + nudge, Y - h]), inv([X + w, Y - h + nudge]), inv([X + w - nudge, Y]), inv([X, Y - nudge])];
  return { type: 'Polygon' as const, coordinates: [[...ring, ring[0]!]] };
}

/** Polls GET /v1/batch/statistics/{id} every `every` ms until the job is finished. */
export async function waitBatch(t: TestApp, id: string, ms = 120_000, every = 50): Promise<Record<string, any>> {
  const end = Date.now() + ms;
  for (;;) {
    const res = await t.app.inject({ method: 'GET', url: `/v1/batch/statistics/${id}`, headers: t.auth() });
    const r = res.json();
    if (['ready', 'failed', 'cancelled'].includes(r.status)) return r;
    if (Date.now() > end) throw new Error(`batch ${id} still ${r.status}: ${res.body}`);
    await new Promise((x) => setTimeout(x, every));
  }
}

/** The file of a ready job, through its signed link (no API key). */
export async function downloadBatch(t: TestApp, url: string): Promise<{ status: number; type: string; body: string }> {
  const u = new URL(url);
  const res = await t.app.inject({ method: 'GET', url: u.pathname + u.search });
  return { status: res.statusCode, type: String(res.headers['content-type']), body: res.body };
}

const NUMERIC = new Set(['count', 'min', 'max', 'mean', 'std', 'valid_fraction', 'cloud_cover']);

/** CSV rows as objects (fast-csv, as a client would read them): empty cells null, statistics as numbers. */
export async function csvRows(text: string): Promise<Array<Record<string, any>>> {
  const { rows } = await parseCsv(text);
  return rows.map((r) =>
    Object.fromEntries(
      Object.entries(r).map(([h, v]) => {
        if (v === '') return [h, null];
        return [h, NUMERIC.has(h) || /^p\d/.test(h) ? Number(v) : v];
      }),
    ),
  );
}

export const ndjsonRows = (text: string): Array<Record<string, any>> =>
  text
    .split('\n')
    .filter((l) => l.length)
    .map((l) => JSON.parse(l));

/** The members a batch row shares with the time-series endpoint's interval, for comparing the two. */
export const SERIES_KEYS = [
  'interval_start',
  'interval_end',
  'date',
  'imagery_id',
  'min',
  'max',
  'mean',
  'std',
  'valid_fraction',
  'cloud_cover',
] as const;

/** A row or interval reduced to SERIES_KEYS. */
export const pickSeries = (r: Record<string, any>): Record<string, unknown> =>
  Object.fromEntries(SERIES_KEYS.map((k) => [k, r[k]]));
