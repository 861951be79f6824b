/**
 * Imagery registration: validate the request, inspect every file in a worker (georeferenced,
 * decodable, bands aligned), compute the footprint and, for each of the account's fields it
 * covers, the field's own cloud cover; then store it all and emit imagery.available per covered
 * field in one transaction. A broken input is a 400 naming the band and the reason; nothing is
 * stored then.
 */
import { isCalendarDate } from '../platform/dates.js';
import type { ComputePool } from '../compute/pool.js';
import type { CoverageResult, MaskRequest } from '../compute/tasks.js';
import { emitMany } from '../events/index.js';
import type { Boundary } from '../fields/index.js';
import type { Database } from '../platform/database.js';
import type { FileStore } from '../platform/file-store.js';
import { AppError, notFound, RefusedInput, validationFailed, type FieldIssue } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { crsLabel, fromWgs84, toWgs84, type CrsRef } from './crs.js';
import { type Imagery, type ImageryCreate, RADIOMETRY } from './schemas.js';
import type { FieldImagery } from './schemas.js';
import type { Static } from 'typebox';
import { captureFromStac } from './stac.js';
import { LocalPathError, registrationRules, resolveLocal } from './local-path.js';
import { foreignUploads } from './upload-files.js';
import { isUploadHref, uploadIdOf } from './upload-ref.js';
import { limitOf } from './decode-limits.js';
import { coverageGroups, WHOLE, type GridInfo } from './coverage-groups.js';
import { CAPTURE_BANDS, coverageBands, ImageryError, type CaptureBand, type CaptureSource } from './window-reader.js';

export interface ImageryDeps {
  db: Database;
  compute: ComputePool;
  roots: string[];
  /** DATA_DIR/imagery/uploads: at registration, only the caller's own folder in it may be named. */
  uploadDir?: string;
  /** Where POST /v1/imagery/upload stores files (default: the database, in chunks). */
  uploads?: FileStore;
  /**
   * Judges the alert rules of a covered field on a new capture (alerts' evaluateAlerts, wired by
   * the composition root: imagery does not import the alerts feature, which reads captures).
   */
  evaluateAlerts?: (accountId: string, fieldId: string, imageryId: string, capture: CaptureSource) => Promise<number>;
  /**
   * Of these fields, the ones with alert rules (alerts' fieldsWithRules): only those are judged,
   * so a capture over 1,000 fields without rules costs one query, not 1,000. Absent: all are.
   */
  alertFields?: (accountId: string, fieldIds: string[]) => Promise<Set<string>>;
  /** Where failures after the response is decided go (a field's coverage, alert evaluation). */
  log?: { warn(obj: object, msg: string): void };
}

function invalid(path: string, code: string, message: string): AppError {
  return new AppError('invalid_imagery', message, { errors: [{ path, code, message }] });
}

/**
 * A scale and offset out of RADIOMETRY's range (schemas.ts), which the body's schema refuses too;
 * checked here as well for what a STAC Item's raster:bands state (a registration or a subscription).
 */
function radiometryIssues(r: { scale?: number; offset?: number }, at: string, issues: FieldIssue[]): void {
  const { minScale, maxScale, maxOffset } = RADIOMETRY;
  if (r.scale !== undefined && !(typeof r.scale === 'number' && r.scale >= minScale && r.scale <= maxScale))
    issues.push({
      path: `${at}/scale`,
      code: 'out_of_range',
      message: `must be from ${minScale} to ${maxScale}: reflectance = DN × scale + offset`,
    });
  if (r.offset !== undefined && !(typeof r.offset === 'number' && Math.abs(r.offset) <= maxOffset))
    issues.push({ path: `${at}/offset`, code: 'out_of_range', message: `must be from -${maxOffset} to ${maxOffset}` });
}

/** The request (or STAC Item) as a capture description, with every reference checked. */
export function normalise(input: ImageryCreate): {
  capture: CaptureSource;
  source: string;
  date: string;
  cloud: number | null;
} {
  const merged: ImageryCreate = input.stac_item
    ? {
        ...captureFromStac(input.stac_item as Record<string, unknown>),
        ...Object.fromEntries(Object.entries(input).filter(([k]) => k !== 'stac_item')),
      }
    : input;
  const issues: FieldIssue[] = [];
  if (!merged.source) issues.push({ path: '/body/source', code: 'required', message: 'is required' });
  if (!merged.capture_date)
    issues.push({ path: '/body/capture_date', code: 'required', message: 'is required (YYYY-MM-DD)' });
  else if (!isCalendarDate(merged.capture_date))
    issues.push({
      path: '/body/capture_date',
      code: 'invalid_date',
      message: `${merged.capture_date} is not a calendar date`,
    });
  const bands: CaptureSource['bands'] = {};
  const entries = Object.entries(merged.bands ?? {});
  if (!entries.length) issues.push({ path: '/body/bands', code: 'required', message: 'at least one band is required' });
  for (const [name, ref] of entries) {
    const p = `/body/bands/${name}`;
    if (!(CAPTURE_BANDS as readonly string[]).includes(name)) {
      issues.push({
        path: p,
        code: 'unknown_band',
        message: `"${name}" is not a band name; use ${CAPTURE_BANDS.join(', ')}`,
      });
      continue;
    }
    const r = typeof ref === 'string' ? { href: ref } : ref;
    if (
      !/^https?:\/\//i.test(r.href) &&
      /^[a-z][a-z0-9+.-]*:\/\//i.test(r.href) &&
      !r.href.startsWith('file://') &&
      !isUploadHref(r.href)
    ) {
      issues.push({
        path: p,
        code: 'unsupported_href',
        message: 'an href is an http(s):// URL, an upload:// reference or a local path',
      });
      continue;
    }
    radiometryIssues(r, p, issues);
    bands[name as CaptureBand] = r;
  }
  radiometryIssues(merged, '/body', issues);
  if (issues.length) throw validationFailed(issues);
  return {
    capture: {
      bands,
      ...(merged.mask ? { mask: merged.mask } : {}),
      scale: merged.scale ?? 0.0001,
      offset: merged.offset ?? 0,
    },
    source: merged.source!,
    date: merged.capture_date!,
    cloud: merged.cloud_cover ?? null,
  };
}

const bandPath = (band: string) => (band === 'mask' ? '/body/mask' : `/body/bands/${band}`);

/** inspect.ts and window-reader.ts start the reason of a CrsError so. */
const CRS_REASON = /^unsupported CRS: /;

/**
 * Errors from the worker arrive as `band: reason`; a file refused by the decode limits as
 * `band: [code] reason` (decode-limits.ts), and its code (decompression_bomb, ifd_loop,
 * too_many_blocks, …) becomes the issue's code.
 */
function fromWorker(err: unknown): RefusedInput {
  const m = (err as Error)?.message ?? String(err);
  const hit = /^(B\d\d|B8A|mask): (.*)$/s.exec(m);
  return hit
    ? new RefusedInput(new ImageryError(hit[1]!, hit[2]!), bandPath(hit[1]!))
    : new RefusedInput(new ImageryError('', m), '/body');
}

/** The field-level code of an ImageryError's reason (src/problem-map.ts answers it as invalid_imagery). */
export function imageryIssue(err: ImageryError): { code: string; message: string } {
  const limit = limitOf(err.reason);
  const code = limit?.code ?? (CRS_REASON.test(err.reason) ? 'unsupported_crs' : 'unreadable_file');
  const reason = limit?.reason ?? err.reason;
  return { code, message: err.band ? `${err.band}: ${reason}` : reason };
}

function footprintOf(
  band: string,
  info: { epsg: CrsRef; width: number; height: number; resX: number; resY: number; originX: number; originY: number },
): Boundary & { type: 'Polygon' } {
  let inv: (xy: [number, number]) => [number, number];
  let fwd: (lonLat: [number, number]) => [number, number];
  try {
    inv = toWgs84(info.epsg);
    fwd = fromWgs84(info.epsg);
  } catch (err) {
    throw new RefusedInput(new ImageryError(band, `unsupported CRS: ${(err as Error).message}`), `/body/bands/${band}`);
  }
  const x1 = info.originX + info.width * info.resX;
  const y1 = info.originY + info.height * info.resY;
  const corners: Array<[number, number]> = [
    [info.originX, info.originY],
    [x1, info.originY],
    [x1, y1],
    [info.originX, y1],
  ];
  const ring: Array<[number, number]> = [];
  // proj4 inverts points outside a projection's domain into some lon/lat (UTM wraps latitudes): a
  // point counts only if projecting it back lands where it started (to a tenth of a pixel).
  const tolerance = Math.abs(info.resX) / 10;
  let onEarth = true;
  // Densified edges: a UTM rectangle is not a rectangle in lon/lat.
  for (let k = 0; k < 4; k++) {
    const [ax, ay] = corners[k]!;
    const [bx, by] = corners[(k + 1) % 4]!;
    for (let t = 0; t < 8; t++) {
      const xy: [number, number] = [ax + ((bx - ax) * t) / 8, ay + ((by - ay) * t) / 8];
      const p = inv(xy);
      const back = Number.isFinite(p[0]) && Number.isFinite(p[1]) && Math.abs(p[1]) <= 90 ? fwd(p) : [NaN, NaN];
      if (!(Math.abs(back[0]! - xy[0]) <= tolerance && Math.abs(back[1]! - xy[1]) <= tolerance)) onEarth = false;
      ring.push(p);
    }
  }
  if (!onEarth) {
    throw invalid(
      `/body/bands/${band}`,
      'unsupported_crs',
      `${band}: the raster's extent cannot be expressed in WGS84 from its ${crsLabel(info.epsg)}: check the georeferencing`,
    );
  }
  ring.push(ring[0]!);
  // RFC 7946: counter-clockwise exterior.
  let a = 0;
  for (let i = 0; i < ring.length - 1; i++) a += ring[i]![0] * ring[i + 1]![1] - ring[i + 1]![0] * ring[i]![1];
  return { type: 'Polygon', coordinates: [a < 0 ? ring.reverse() : ring] };
}

function bboxOf(ring: Array<[number, number]>): [number, number, number, number] {
  const b: [number, number, number, number] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const [x, y] of ring) {
    b[0] = Math.min(b[0], x);
    b[1] = Math.min(b[1], y);
    b[2] = Math.max(b[2], x);
    b[3] = Math.max(b[3], y);
  }
  return b;
}

interface ImageryRow {
  id: string;
  source: string;
  capture_date: string;
  cloud_cover: number | null;
  bands: Record<string, unknown>;
  scale: number;
  offset: number;
  epsg: number | null;
  crs: string | null;
  resolution: number;
  footprint: Record<string, unknown>;
  created_at: Date;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Every local href of the capture must lie in IMAGERY_ROOTS, and in the uploads directory only in
 * the caller's own folder; checked here, where the account is known, before any file is opened.
 * One answer for every path outside (existing or not), so the disk cannot be probed.
 */
async function checkLocalPaths(deps: ImageryDeps, accountId: string, capture: CaptureSource): Promise<void> {
  const rules = registrationRules(deps.roots, deps.uploadDir, accountId);
  const refs: Array<[string, string]> = [
    ...Object.entries(capture.bands).map(([b, src]): [string, string] => [b, src!.href]),
    ...(capture.mask ? [['mask', capture.mask.href] as [string, string]] : []),
  ];
  for (const [band, href] of refs) {
    if (/^https?:\/\//i.test(href)) continue;
    if (isUploadHref(href)) {
      // An uploaded file (upload://<id>) of this account only; any other gets one answer.
      const id = uploadIdOf(href);
      if (!id || (await foreignUploads(deps.db, accountId, [id])).length)
        throw invalid(
          bandPath(band),
          'unknown_upload',
          `${band}: the upload:// reference names no uploaded file of this account`,
        );
      continue;
    }
    try {
      await resolveLocal(href, rules);
    } catch (err) {
      throw err instanceof LocalPathError ? new RefusedInput(err, bandPath(band)) : err;
    }
  }
}

type Covered = {
  field_id: string;
  field_pixels: number;
  valid_pixels: number;
  cloud_cover: number;
  /** No pixel centre inside: the weights of the pixels the field touches (otherwise null). */
  field_weight: number | null;
  valid_weight: number | null;
};

/**
 * A link's counts from a coverage: a field with a pixel centre inside by its pixels, one that only
 * touches pixels by their weights (cloud cover 1 - valid weight / field weight); null when the
 * field has no pixel of the capture.
 */
export function linkCounts(
  c: CoverageResult,
): Pick<Covered, 'field_pixels' | 'valid_pixels' | 'cloud_cover' | 'field_weight' | 'valid_weight'> | null {
  if (c.fieldPixels > 0)
    return {
      field_pixels: c.fieldPixels,
      valid_pixels: c.validPixels,
      cloud_cover: round2(100 * (1 - c.validPixels / c.fieldPixels)),
      field_weight: null,
      valid_weight: null,
    };
  if (!c.touched) return null;
  const { fieldWeight, validWeight } = c.touched;
  return {
    field_pixels: 0,
    valid_pixels: 0,
    cloud_cover: round2(100 * (1 - validWeight / fieldWeight)),
    field_weight: fieldWeight,
    valid_weight: validWeight,
  };
}

type Candidate = { id: string; boundary: Boundary; bbox: [number, number, number, number] };

/**
 * An account's fields with their boundaries, loaded once and reused by the registrations of one
 * caller (a subscription poll: every Item of a tile meets the same 1,000 fields, whose boundaries
 * were one SELECT of 1,000 JSON boundaries per Item). Before each use, one small statement checks
 * the fields have not changed (their count and newest updated_at: a field created, deleted or
 * redrawn changes one of them) and they are loaded again if they have; so an Item sees the fields
 * as they are when it is registered, as with the SELECT per Item.
 */
export class FieldSnapshot {
  private version: string | null = null;
  private fields: Candidate[] = [];
  private loading: Promise<void> | null = null;

  constructor(
    private readonly db: Database,
    private readonly accountId: string,
  ) {}

  /** Fields whose box meets `bbox` (lon/lat), in the order the account's fields were loaded. */
  async candidates(bbox: readonly number[]): Promise<Array<{ id: string; boundary: Boundary }>> {
    const [v] = await this.db.query<{ n: number; at: Date | null }>(
      'SELECT count(*)::int AS n, max(updated_at) AS at FROM fields WHERE account_id = $1',
      [this.accountId],
    );
    const version = `${v!.n}|${v!.at?.getTime() ?? ''}`;
    // Registrations running at once share a load; one that checked another version than the load
    // in flight was started for loads again once it is done.
    while (version !== this.version) {
      this.loading ??= this.db
        .query<Candidate>('SELECT id, boundary, bbox FROM fields WHERE account_id = $1 ORDER BY created_at, id', [
          this.accountId,
        ])
        .then((rows) => {
          this.fields = rows.map((r) => ({ ...r, bbox: r.bbox.map(Number) as Candidate['bbox'] }));
          this.version = version;
        })
        .finally(() => {
          this.loading = null;
        });
      await this.loading;
    }
    const [x0, y0, x1, y1] = bbox as [number, number, number, number];
    return this.fields.filter((f) => f.bbox[0] <= x1 && f.bbox[2] >= x0 && f.bbox[1] <= y1 && f.bbox[3] >= y0);
  }
}

/**
 * Each candidate field's coverage by the capture, the fields in groups of nearby ones
 * (coverage-groups.ts), each group one compute task that reads the files once, the groups on
 * the pool at once. One field whose coverage cannot be computed must not refuse the capture for
 * the others: it is logged and left out. In the candidates' order.
 */
async function coveredFields(
  deps: ImageryDeps,
  capture: CaptureSource,
  candidates: Array<{ id: string; boundary: Boundary }>,
  grid: GridInfo,
  mask?: MaskRequest,
  concurrent = false,
): Promise<Covered[]> {
  const bands = coverageBands(capture);
  const results: Array<Covered | null> = candidates.map(() => null);
  const leftOut = (field_id: string, err: unknown) =>
    deps.log?.warn({ err, field_id }, 'coverage of a field by a new capture failed; the field is left out');
  await Promise.all(
    coverageGroups(
      candidates.map((f) => f.boundary),
      grid,
      concurrent ? 1 : deps.compute.size,
      ...(concurrent ? [WHOLE] : []),
    ).map(async (group) => {
      const done = await deps.compute
        .coverageBatch({
          capture,
          boundaries: group.map((i) => candidates[i]!.boundary),
          bands,
          roots: deps.roots,
          ...(mask ? { mask } : {}),
        })
        .catch((err: Error) => {
          for (const i of group) leftOut(candidates[i]!.id, err);
          return null;
        });
      for (const [k, c] of (done?.fields ?? []).entries()) {
        const f = candidates[group[k]!]!;
        if ('error' in c) leftOut(f.id, new Error(c.error));
        else {
          const counts = linkCounts(c);
          if (counts) results[group[k]!] = { field_id: f.id, ...counts };
        }
      }
    }),
  );
  return results.filter((c): c is Covered => c !== null);
}

/** Where a capture registered from a STAC API subscription came from (its Item and why it was found). */
export interface StacOrigin {
  collection: string;
  itemId: string;
  subscriptionId: string;
  /** Found by a new field's backfill search or the subscription's first search (payload `backfill`). */
  backfill: boolean;
  /**
   * The subscription's cloud mask (issue 23; absent: the default): the fields' cloud cover is
   * counted under it, and the capture keeps it (coverage_mask) for fields linked later.
   */
  mask?: MaskRequest;
}

/** How a caller that registers many captures (a subscription poll) wants them registered. */
export interface RegisterOptions {
  stac?: StacOrigin;
  /**
   * Other captures are registered at once and keep the compute threads busy: a capture's fields
   * are not split across threads, and its groups are larger (coverage-groups.ts WHOLE), so no
   * tile is decoded twice for one capture.
   */
  concurrent?: boolean;
  /** The account's fields, loaded once for many registrations (else one SELECT per registration). */
  fields?: FieldSnapshot;
}

/**
 * With `opts.stac`, the capture is stored only if the account has no capture of that collection
 * and Item id yet (the unique index, ON CONFLICT DO NOTHING): null then, and nothing is linked or
 * emitted, so two pollers registering one Item at once announce it once.
 */
export async function registerImagery(deps: ImageryDeps, accountId: string, input: ImageryCreate): Promise<Imagery>;
export async function registerImagery(
  deps: ImageryDeps,
  accountId: string,
  input: ImageryCreate,
  opts: RegisterOptions & { stac: StacOrigin },
): Promise<Imagery | null>;
export async function registerImagery(
  deps: ImageryDeps,
  accountId: string,
  input: ImageryCreate,
  opts: RegisterOptions = {},
): Promise<Imagery | null> {
  const { capture, source, date, cloud } = normalise(input);
  const stac = opts.stac;
  await checkLocalPaths(deps, accountId, capture);
  const info = await deps.compute.inspect({ capture, roots: deps.roots }).catch((err) => {
    throw fromWorker(err);
  });
  const entries = Object.entries(info.bands).filter(([b]) => b !== 'mask');
  const [finestBand, finest] = entries.reduce((a, b) => (Math.abs(b[1].resX) < Math.abs(a[1].resX) ? b : a));
  const footprint = footprintOf(finestBand, finest);
  const bbox = bboxOf(footprint.coordinates[0]!);
  const candidates = opts.fields
    ? await opts.fields.candidates(bbox)
    : await deps.db.query<{ id: string; boundary: Boundary }>(
        `SELECT id, boundary FROM fields WHERE account_id = $1 AND bbox[1] <= $4 AND bbox[3] >= $2 AND bbox[2] <= $5 AND bbox[4] >= $3`,
        [accountId, bbox[0], bbox[1], bbox[2], bbox[3]],
      );
  const mask = stac?.mask && Object.keys(stac.mask).length ? stac.mask : undefined;
  const covered = await coveredFields(deps, capture, candidates, finest, mask, opts.concurrent);
  const id = newId('img');
  const row = await deps.db.transaction(async (tx) => {
    const [r] = await tx.query<ImageryRow>(
      `INSERT INTO imagery (id, account_id, source, capture_date, cloud_cover, bands, mask, scale, "offset", epsg, crs, resolution, footprint, bbox,
                            stac_collection, stac_item_id, subscription_id, coverage_mask)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16, $17, $18::jsonb)
       ON CONFLICT (account_id, stac_collection, stac_item_id) WHERE stac_item_id IS NOT NULL DO NOTHING
       RETURNING id, source, capture_date::text AS capture_date, cloud_cover, bands, scale, "offset", epsg, crs, resolution, footprint, created_at`,
      [
        id,
        accountId,
        source,
        date,
        cloud,
        JSON.stringify(capture.bands),
        capture.mask ? JSON.stringify(capture.mask) : null,
        capture.scale,
        capture.offset,
        typeof finest.epsg === 'number' ? finest.epsg : null,
        typeof finest.epsg === 'string' ? finest.epsg : null,
        Math.abs(finest.resX),
        JSON.stringify(footprint),
        bbox,
        stac?.collection ?? null,
        stac?.itemId ?? null,
        stac?.subscriptionId ?? null,
        mask ? JSON.stringify(mask) : null,
      ],
    );
    if (!r) return null; // that Item is registered already: linked and announced then
    // One statement for the links and one for the events, however many fields the capture covers
    await tx.query(
      `INSERT INTO imagery_fields (imagery_id, field_id, field_pixels, valid_pixels, cloud_cover, field_weight, valid_weight)
       SELECT $1, u.field_id, u.field_pixels, u.valid_pixels, u.cloud_cover, u.field_weight, u.valid_weight
         FROM unnest($2::text[], $3::int[], $4::int[], $5::float8[], $6::float8[], $7::float8[])
           AS u(field_id, field_pixels, valid_pixels, cloud_cover, field_weight, valid_weight)`,
      [
        id,
        covered.map((c) => c.field_id),
        covered.map((c) => c.field_pixels),
        covered.map((c) => c.valid_pixels),
        covered.map((c) => c.cloud_cover),
        covered.map((c) => c.field_weight),
        covered.map((c) => c.valid_weight),
      ],
    );
    await emitMany(
      tx,
      accountId,
      'imagery.available',
      covered.map((c) => ({
        field_id: c.field_id,
        imagery_id: id,
        source,
        capture_date: date,
        cloud_cover: c.cloud_cover,
        ...(stac ? { subscription_id: stac.subscriptionId, backfill: stac.backfill } : {}),
      })),
    );
    return r;
  });
  if (!row) return null;
  // Alert rules of the covered fields are judged on the new capture (after the commit: the
  // capture exists whatever the evaluation does).
  const judged =
    deps.evaluateAlerts && deps.alertFields && covered.length
      ? await deps
          .alertFields(
            accountId,
            covered.map((c) => c.field_id),
          )
          .then(
            (ids) => covered.filter((c) => ids.has(c.field_id)),
            (err: Error) => {
              deps.log?.warn({ err, imagery_id: id }, 'looking up the alert rules of the covered fields failed');
              return covered;
            },
          )
      : covered;
  for (const c of deps.evaluateAlerts ? judged : []) {
    await deps.evaluateAlerts!(accountId, c.field_id, id, capture).catch((err: Error) => {
      deps.log?.warn({ err, field_id: c.field_id, imagery_id: id }, 'alert evaluation of a new capture failed');
      return 0;
    });
  }
  return toImagery(row, covered);
}

/**
 * Links a field to the account's captures that cover it, as registration does for the fields that
 * exist then: a field registered after its captures, or a field whose boundary changed. Examined:
 * every capture whose footprint box meets the field's box, and every capture linked to the field
 * now (a changed boundary may have left it). Each one's coverage is computed on the worker pool
 * (a few at a time), and the field's rows for the examined captures are replaced in one
 * transaction; rows of a capture registered meanwhile (not examined) are left as they are. No
 * imagery.available is emitted: the captures are not new, and a subscriber learns of the field
 * from its own request. A capture whose coverage cannot be computed is logged and left out.
 * Returns the number of captures linked.
 */
export async function linkFieldImagery(
  deps: ImageryDeps,
  accountId: string,
  field: { id: string; boundary: Boundary; bbox: [number, number, number, number] },
): Promise<number> {
  const [x0, y0, x1, y1] = field.bbox;
  const rows = await deps.db.query<{
    id: string;
    bands: CaptureSource['bands'];
    mask: CaptureSource['mask'] | null;
    scale: number;
    offset: number;
    coverage_mask: MaskRequest | null;
  }>(
    `SELECT id, bands, mask, scale, "offset", coverage_mask FROM imagery
      WHERE account_id = $1 AND ((bbox[1] <= $4 AND bbox[3] >= $2 AND bbox[2] <= $5 AND bbox[4] >= $3)
         OR id IN (SELECT imagery_id FROM imagery_fields WHERE field_id = $6))
      ORDER BY capture_date, id`,
    [accountId, x0, y0, x1, y1, field.id],
  );
  if (!rows.length) return 0;
  const covered: Array<{ imagery_id: string } & NonNullable<ReturnType<typeof linkCounts>>> = [];
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < rows.length) {
      const r = rows[next++]!;
      const capture: CaptureSource = {
        bands: r.bands,
        ...(r.mask ? { mask: r.mask } : {}),
        scale: r.scale,
        offset: r.offset,
      };
      const c = await deps.compute
        .coverage({
          capture,
          boundary: field.boundary,
          bands: coverageBands(capture),
          roots: deps.roots,
          ...(r.coverage_mask ? { mask: r.coverage_mask } : {}),
        })
        .catch((err: Error) => {
          deps.log?.warn(
            { err, field_id: field.id, imagery_id: r.id },
            'coverage of a field by a capture failed; the capture is left out',
          );
          return null;
        });
      const counts = c && linkCounts(c);
      if (counts) covered.push({ imagery_id: r.id, ...counts });
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, rows.length) }, one));
  await deps.db.transaction(async (tx) => {
    // the field may have been deleted meanwhile: then there is nothing to link
    const [f] = await tx.query<{ id: string }>('SELECT id FROM fields WHERE id = $1 AND account_id = $2 FOR UPDATE', [
      field.id,
      accountId,
    ]);
    if (!f) return;
    await tx.query('DELETE FROM imagery_fields WHERE field_id = $1 AND imagery_id = ANY($2::text[])', [
      field.id,
      rows.map((r) => r.id),
    ]);
    for (const c of covered) {
      await tx.query(
        `INSERT INTO imagery_fields (imagery_id, field_id, field_pixels, valid_pixels, cloud_cover, field_weight, valid_weight)
         SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM imagery WHERE id = $1)`,
        [c.imagery_id, field.id, c.field_pixels, c.valid_pixels, c.cloud_cover, c.field_weight, c.valid_weight],
      );
    }
  });
  return covered.length;
}

function toImagery(r: ImageryRow, fields: Imagery['fields']): Imagery {
  return {
    id: r.id,
    source: r.source,
    capture_date: r.capture_date,
    cloud_cover: r.cloud_cover,
    bands: Object.keys(r.bands),
    crs: r.crs ?? `EPSG:${r.epsg}`,
    resolution: r.resolution,
    footprint: r.footprint,
    scale: r.scale,
    offset: r.offset,
    fields,
    created_at: r.created_at.toISOString(),
  };
}

export async function getImagery(db: Database, accountId: string, id: string): Promise<Imagery> {
  const [r] = await db.query<ImageryRow>(
    `SELECT id, source, capture_date::text AS capture_date, cloud_cover, bands, scale, "offset", epsg, crs, resolution, footprint, created_at
       FROM imagery WHERE id = $1 AND account_id = $2`,
    [id, accountId],
  );
  if (!r) throw notFound('Imagery', id);
  const fields = await db.query<Imagery['fields'][number]>(
    'SELECT field_id, cloud_cover, field_pixels, valid_pixels FROM imagery_fields WHERE imagery_id = $1 ORDER BY field_id',
    [id],
  );
  return toImagery(r, fields);
}

export async function listFieldImagery(
  db: Database,
  accountId: string,
  fieldId: string,
  q: { start_date?: string; end_date?: string; page: number; per_page: number },
): Promise<{ data: Array<Static<typeof FieldImagery>>; total: number }> {
  const exists = await db.query('SELECT 1 FROM fields WHERE id = $1 AND account_id = $2', [fieldId, accountId]);
  if (!exists.length) throw notFound('Field', fieldId);
  for (const [k, v] of [
    ['start_date', q.start_date],
    ['end_date', q.end_date],
  ] as const) {
    if (v && !isCalendarDate(v))
      throw new AppError('validation_failed', `${k} ${v} is not a calendar date`, {
        errors: [{ path: `/query/${k}`, code: 'invalid_date', message: 'is not a calendar date' }],
      });
  }
  const params = [fieldId, accountId, q.start_date ?? null, q.end_date ?? null];
  const where = `f.field_id = $1 AND i.account_id = $2 AND ($3::date IS NULL OR i.capture_date >= $3::date) AND ($4::date IS NULL OR i.capture_date <= $4::date)`;
  const [{ n }] = (await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM imagery_fields f JOIN imagery i ON i.id = f.imagery_id WHERE ${where}`,
    params,
  )) as [{ n: number }];
  const rows = await db.query<{
    id: string;
    source: string;
    capture_date: string;
    cloud_cover: number;
    scene_cloud_cover: number | null;
    field_pixels: number;
    valid_pixels: number;
  }>(
    `SELECT i.id, i.source, i.capture_date::text AS capture_date, f.cloud_cover, i.cloud_cover AS scene_cloud_cover, f.field_pixels, f.valid_pixels
       FROM imagery_fields f JOIN imagery i ON i.id = f.imagery_id WHERE ${where}
      ORDER BY i.capture_date, i.id LIMIT $5 OFFSET $6`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: rows, total: n };
}
