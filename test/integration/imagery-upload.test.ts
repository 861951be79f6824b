/**
 * POST /v1/imagery/upload over real HTTP (multipart from fetch's FormData): a synthetic capture
 * uploaded as files registers exactly as the same files registered by path (same field cloud
 * cover, imagery.available), its files are stored in the database (named upload://<file id>, copied
 * into DATA_DIR/cache/uploads to be read) and later reads (the index endpoint) use them; a STAC Item whose assets name parts; and every broken upload answers
 * 400 (413 over UPLOAD_MAX_BYTES, 415 when not multipart) with no record, no event and no file left.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { datesEvery, sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { DatabaseFileStore } from '../../src/platform/file-store.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { storedUploads } from '../helpers/uploads.js';

const MAX = 400_000;

describe('imagery upload (multipart)', () => {
  let t: TestApp;
  let scratch: string;
  let base: string;
  let cap: SyntheticCapture;
  let fieldId: string;
  let secondId: string;
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 120, seed: 4 };

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'upload-'));
    // IMAGERY_ROOTS does not contain the uploads directory: the service allows it anyway.
    t = await buildTestApp(
      { name: 'pglite' },
      {
        env: {
          DATA_DIR: path.join(scratch, 'data'),
          IMAGERY_ROOTS: path.join(scratch, 'src'),
          UPLOAD_MAX_BYTES: String(MAX),
        },
      },
    );
    // The second date of the generator has a cloud patch: the field's cloud cover is not trivial.
    [, cap] = writeSyntheticSeason(
      path.join(scratch, 'src'),
      spec,
      datesEvery('2025-06-01', '2025-06-11', 10),
      '2025-04-01',
      '2025-09-30',
    ) as [SyntheticCapture, SyntheticCapture];
    fieldId = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'upload test', boundary: sceneField(spec) },
      })
    ).json().id;
    // A second, larger field around the first: each covered field gets its own cloud cover and event.
    secondId = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'surrounding', boundary: sceneField(spec, 0.9) },
      })
    ).json().id;
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await t.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const file = (p: string) => new Blob([readFileSync(p)], { type: 'image/tiff' });
  function form(metadata: unknown, files: Record<string, Blob>): FormData {
    const f = new FormData();
    if (metadata !== undefined)
      f.append('metadata', typeof metadata === 'string' ? metadata : JSON.stringify(metadata));
    for (const [name, blob] of Object.entries(files)) f.append(name, blob, `${name}.tif`);
    return f;
  }
  const upload = (body: FormData | string, headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/imagery/upload`, { method: 'POST', headers: { ...t.auth(), ...headers }, body });
  const count = async () => (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM imagery'))[0]!.n;
  /** The uploaded files (and their chunks) in the database. */
  const stored = () => storedUploads(t.db);

  it('registers uploaded files exactly as the same files registered by path, and later reads use them', async () => {
    const byPath = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: {
        source: 'sentinel-2-l2a',
        capture_date: cap.date,
        bands: { B04: cap.files.B04, B08: cap.files.B08 },
        mask: { href: cap.scl, kind: 'scl' },
        offset: -0.1,
      },
    });
    expect(byPath.statusCode, byPath.body).toBe(201);
    const expected = byPath.json().fields;
    expect(expected.map((f: { field_id: string }) => f.field_id).sort()).toEqual([fieldId, secondId].sort());
    expect(expected[0].cloud_cover).toBeGreaterThan(0);
    expect(expected[0].cloud_cover).not.toBe(expected[1].cloud_cover);

    const res = await upload(
      form(
        {
          source: 'sentinel-2-l2a',
          capture_date: cap.date,
          bands: { B04: 'red', B08: { href: 'nir', index: 1 } },
          mask: { href: 'scl', kind: 'scl' },
          offset: -0.1,
        },
        { red: file(cap.files.B04!), nir: file(cap.files.B08!), scl: file(cap.scl) },
      ),
    );
    const img = (await res.json()) as any;
    expect(res.status, JSON.stringify(img)).toBe(201);
    expect(res.headers.get('location')).toMatch(new RegExp(`/v1/imagery/${img.id}$`));
    expect(img).toMatchObject({
      id: expect.stringMatching(/^img_/),
      crs: 'EPSG:32631',
      resolution: 10,
      bands: ['B04', 'B08'],
      capture_date: cap.date,
    });
    expect(img.fields).toEqual(expected);
    const events = (await listOutbox(t.db, t.accountId, 'imagery.available')).filter(
      (e) => e.data.imagery_id === img.id,
    );
    expect(events.map((e) => e.data).sort((a, b) => String(a.field_id).localeCompare(String(b.field_id)))).toEqual(
      expected
        .map((f: { field_id: string; cloud_cover: number }) => ({
          field_id: f.field_id,
          imagery_id: img.id,
          source: 'sentinel-2-l2a',
          capture_date: cap.date,
          cloud_cover: f.cloud_cover,
        }))
        .sort((a: { field_id: string }, b: { field_id: string }) => a.field_id.localeCompare(b.field_id)),
    );
    // Stored in the database, byte for byte, named upload://<file id>; the copies read are in the
    // local read cache, DATA_DIR/cache/uploads/<file id>.tif.
    const [row] = await t.db.query<{ bands: Record<string, { href: string }>; mask: { href: string } }>(
      'SELECT bands, mask FROM imagery WHERE id = $1',
      [img.id],
    );
    const store = new DatabaseFileStore(t.db);
    for (const [href, original] of [
      [row!.bands.B04!.href, cap.files.B04!],
      [row!.mask.href, cap.scl],
    ] as const) {
      expect(href).toMatch(/^upload:\/\/upl_[A-Za-z0-9_-]{22}$/);
      const id = href.slice('upload://'.length);
      const { file, chunks } = await store.open(id);
      const parts: Uint8Array[] = [];
      for await (const c of chunks) parts.push(c);
      expect(Buffer.concat(parts).equals(readFileSync(original)), href).toBe(true);
      expect(file).toMatchObject({ accountId: t.accountId, size: readFileSync(original).length });
      const cached = path.join(scratch, 'data', 'cache', 'uploads', `${id}.tif`);
      expect(readFileSync(cached).equals(readFileSync(original)), cached).toBe(true);
    }
    // The index endpoint reads the uploaded files and agrees with the capture registered by path.
    const q = (id: string) =>
      t.app.inject({
        method: 'GET',
        url: `/v1/fields/${fieldId}/indices?index=NDVI&date=${cap.date}&imagery_id=${id}&zonal_stats=true&geojson=false`,
        headers: t.auth(),
      });
    const a = await q(img.id);
    const b = await q(byPath.json().id);
    expect(a.statusCode, a.body).toBe(200);
    expect(a.json().zonal_stats).toEqual(b.json().zonal_stats);
  });

  it('accepts a STAC Item whose asset hrefs name the parts', async () => {
    const item = {
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'S2_SYNTH',
      collection: 'sentinel-2-l2a',
      properties: { datetime: `${cap.date}T10:30:00Z`, 'eo:cloud_cover': 12.5, 's2:processing_baseline': '05.10' },
      assets: { red: { href: 'red' }, nir: { href: 'nir' }, scl: { href: 'scl' } },
    };
    const res = await upload(
      form({ stac_item: item }, { red: file(cap.files.B04!), nir: file(cap.files.B08!), scl: file(cap.scl) }),
    );
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(201);
    expect(body.fields).toHaveLength(2);
    expect(body).toMatchObject({
      source: 'sentinel-2-l2a',
      capture_date: cap.date,
      cloud_cover: 12.5,
      offset: -0.1,
      bands: ['B04', 'B08'],
    });
  });

  it('every broken upload is refused with nothing stored: no record, no event, no file', async () => {
    const corrupt = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7919) % 256));
    const full = readFileSync(cap.files.B04!);
    const big = writeGeoTiff({
      width: 400,
      height: 400,
      data: Uint16Array.from({ length: 160_000 }, (_, i) => (i * 2654435761) >>> 16),
      epsg: 32631,
      originX: 630_000,
      originY: 5_602_000,
      resolution: 10,
      compression: 'none',
    });
    expect(big.length).toBeGreaterThan(MAX);
    const plain = path.join(scratch, 'plain.json');
    writeFileSync(plain, '{}');
    const meta = (bands: Record<string, unknown>, extra: object = {}) => ({
      source: 'sentinel-2-l2a',
      capture_date: cap.date,
      bands,
      ...extra,
    });
    const before = await count();
    const eventsBefore = (await listOutbox(t.db, t.accountId)).length;
    const storedBefore = await stored();
    const cases: Array<[string, () => Promise<Response>, number, string, RegExp]> = [
      [
        'corrupt bytes',
        () => upload(form(meta({ B04: 'red' }), { red: new Blob([corrupt]) })),
        400,
        '/body/bands/B04',
        /not a readable GeoTIFF|cannot be decoded/,
      ],
      [
        'truncated file',
        () =>
          upload(
            form(meta({ B04: 'red', B08: 'nir' }), {
              red: new Blob([full.subarray(0, Math.floor(full.length * 0.6))]),
              nir: file(cap.files.B08!),
            }),
          ),
        400,
        '/body/bands/B04',
        /corrupt or truncated|not a readable/,
      ],
      [
        'not a GeoTIFF at all',
        () => upload(form(meta({ B04: 'red' }), { red: new Blob([readFileSync(plain)]) })),
        400,
        '/body/bands/B04',
        /not a readable GeoTIFF/,
      ],
      [
        'bands that do not line up (CRS)',
        () =>
          upload(
            form(meta({ B04: 'red', B08: 'nir' }), {
              red: file(cap.files.B04!),
              nir: new Blob([
                writeGeoTiff({
                  width: 16,
                  height: 16,
                  data: new Uint16Array(256).fill(9),
                  epsg: 32632,
                  originX: 0,
                  originY: 0,
                  resolution: 10,
                }),
              ]),
            }),
          ),
        400,
        '/body/bands/B08',
        /CRS EPSG:32632 differs/,
      ],
      [
        'an href naming no part',
        () => upload(form(meta({ B04: 'red', B08: 'nirr' }), { red: file(cap.files.B04!), nir: file(cap.files.B08!) })),
        400,
        '/body/bands/B08',
        /names no uploaded file part/,
      ],
      [
        'a local path instead of a part',
        () => upload(form(meta({ B04: cap.files.B04 }), { red: file(cap.files.B04!) })),
        400,
        '/body/bands/B04',
        /names no uploaded file part/,
      ],
      [
        'a part no band uses',
        () => upload(form(meta({ B04: 'red' }), { red: file(cap.files.B04!), extra: file(cap.files.B08!) })),
        400,
        '/parts/extra',
        /not referenced/,
      ],
      ['no metadata', () => upload(form(undefined, { red: file(cap.files.B04!) })), 400, '/parts/metadata', /missing/],
      [
        'metadata that is not JSON',
        () => upload(form('{"source": ', { red: file(cap.files.B04!) })),
        400,
        '',
        /not valid JSON/,
      ],
      [
        'metadata off the schema',
        () => upload(form(meta({ B04: 'red' }, { colour: 'red' }), { red: file(cap.files.B04!) })),
        400,
        '/body/colour',
        /not a known property/,
      ],
      [
        'an unknown band',
        () => upload(form(meta({ B13: 'red' }), { red: file(cap.files.B04!) })),
        400,
        '/body/bands/B13',
        /not a band name/,
      ],
      ['no file', () => upload(form(meta({ B04: 'red' }), {})), 400, '/body', /no file was uploaded/],
      [
        'a duplicated part name',
        () => {
          const f = form(meta({ B04: 'red' }), { red: file(cap.files.B04!) });
          f.append('red', file(cap.files.B08!), 'again.tif');
          return upload(f);
        },
        400,
        '/parts/red',
        /unique/,
      ],
      [
        'two metadata parts (the last one was used and the first ignored)',
        () => {
          const f = form(meta({ B04: 'red' }), { red: file(cap.files.B04!) });
          f.append('metadata', JSON.stringify(meta({ B04: 'red' }, { capture_date: '2020-01-01' })));
          return upload(f);
        },
        400,
        '/parts/metadata',
        /one "metadata" part/,
      ],
      [
        'a file over UPLOAD_MAX_BYTES',
        () => upload(form(meta({ B04: 'red' }), { red: new Blob([big]) })),
        413,
        '',
        /larger than 400000 bytes/,
      ],
      [
        'a JSON body',
        () => upload(JSON.stringify(meta({ B04: 'red' })), { 'content-type': 'application/json' }),
        415,
        '',
        /multipart\/form-data/,
      ],
    ];
    for (const [why, send, status, p, msg] of cases) {
      const res = await send();
      const body = (await res.json()) as any;
      expect(res.status, `${why}: ${JSON.stringify(body)}`).toBe(status);
      expect(res.headers.get('content-type'), why).toMatch(/application\/problem\+json/);
      if (p) expect(body.errors?.[0]?.path, `${why}: ${JSON.stringify(body)}`).toBe(p);
      expect(body.detail, why).toMatch(msg);
      expect(await stored(), `${why}: files left behind`).toEqual(storedBefore);
    }
    expect(await count()).toBe(before);
    expect((await listOutbox(t.db, t.accountId)).length).toBe(eventsBefore);
  });
});
