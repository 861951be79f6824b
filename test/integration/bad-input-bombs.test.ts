/**
 * Decompression bombs and hostile TIFF structure (issue #16), built in code
 * (src/imagery/hostile-tiffs.ts): every file is sent by local path (POST /v1/imagery, inside
 * IMAGERY_ROOTS) and uploaded (POST /v1/imagery/upload), and every answer is a 400
 * application/problem+json whose errors[0].code names the reason; no 5xx, and nothing is stored.
 * A 10980² Sentinel-2-sized band and a normal capture still register under the same limits.
 * IMAGERY_MAX_DECODED_BYTES is lowered to 16 MiB here so that one file (a 4096² single-strip band,
 * decoded twice by the checks) runs past it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { hostileTiffs, sentinelSizedBand } from '../../src/imagery/hostile-tiffs.js';
import { assembleTiff, geoTags, LONG, SHORT, writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { storedUploads } from '../helpers/uploads.js';

const BUDGET = 16 * 1_048_576;
const GRID = { epsg: 32631, originX: 600_000, originY: 5_700_000, resolution: 10 };

/** A 4096² uint8 band in one DEFLATE strip of 16 MiB: fine, but each check of it decodes 16 MiB. */
function singleStrip(): Buffer {
  const side = 4096;
  const strip = deflateSync(Buffer.alloc(side * side, 7));
  return assembleTiff(
    [
      { tag: 256, type: LONG, values: [side] },
      { tag: 257, type: LONG, values: [side] },
      { tag: 258, type: SHORT, values: [8] },
      { tag: 259, type: SHORT, values: [8] },
      { tag: 262, type: SHORT, values: [1] },
      { tag: 273, type: LONG, values: [0] },
      { tag: 277, type: SHORT, values: [1] },
      { tag: 278, type: LONG, values: [side] },
      { tag: 279, type: LONG, values: [strip.length] },
      ...geoTags(GRID),
    ],
    [strip],
  ).buffer;
}

describe('bad input: decompression bombs and hostile TIFF structure', () => {
  let t: TestApp;
  let scratch: string;
  let base: string;
  const previous = process.env.IMAGERY_MAX_DECODED_BYTES;
  const root = () => path.join(scratch, 'src');
  const hostile = [
    ...hostileTiffs(256 * 1_048_576),
    { name: 'a single strip past IMAGERY_MAX_DECODED_BYTES', code: 'decode_limit', file: singleStrip() },
  ];

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'bombs-'));
    mkdirSync(root(), { recursive: true });
    // The compute threads read the limits from the environment they inherit when the pool starts.
    process.env.IMAGERY_MAX_DECODED_BYTES = String(BUDGET);
    t = await buildTestApp(
      { name: 'pglite' },
      {
        env: { DATA_DIR: path.join(scratch, 'data'), IMAGERY_ROOTS: root(), IMAGERY_MAX_DECODED_BYTES: String(BUDGET) },
      },
    );
    // A field over the files' footprint: a registration that gets through computes its coverage.
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
    const f = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: 'under the bombs', boundary },
    });
    expect(f.statusCode, f.body).toBe(201);
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  }, 180_000);
  afterAll(async () => {
    await t?.close();
    if (previous === undefined) delete process.env.IMAGERY_MAX_DECODED_BYTES;
    else process.env.IMAGERY_MAX_DECODED_BYTES = previous;
    rmSync(scratch, { recursive: true, force: true });
  });

  const meta = (href: string) => ({ source: 'sentinel-2-l2a', capture_date: '2025-06-01', bands: { B04: href } });
  const byPath = async (file: string) => {
    const res = await fetch(`${base}/v1/imagery`, {
      method: 'POST',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      body: JSON.stringify(meta(file)),
    });
    return { res, body: (await res.json()) as any };
  };
  const upload = async (file: Buffer) => {
    const form = new FormData();
    form.append('metadata', JSON.stringify(meta('red')));
    form.append('red', new Blob([file]), 'red.tif');
    const res = await fetch(`${base}/v1/imagery/upload`, { method: 'POST', headers: t.auth(), body: form });
    return { res, body: (await res.json()) as any };
  };
  const count = async () => (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM imagery'))[0]!.n;
  /** Uploaded files (and chunks) left in the database. */
  const stored = () => storedUploads(t.db);

  it('every hostile file answers 400 problem+json naming the reason, by path and uploaded, and stores nothing', async () => {
    const before = await count();
    const events = (await listOutbox(t.db, t.accountId)).length;
    // Every answer first, then one comparison: a failure lists every file that got through.
    const got: string[] = [];
    const expected: string[] = [];
    for (const h of hostile) {
      const file = path.join(root(), `${h.name.replace(/\W+/g, '_')}.tif`);
      writeFileSync(file, h.file);
      for (const [route, send] of [
        ['path', () => byPath(file)],
        ['upload', () => upload(h.file)],
      ] as const) {
        const { res, body } = await send();
        const problem =
          /^application\/problem\+json/.test(res.headers.get('content-type') ?? '') &&
          body.code === 'invalid_imagery' &&
          body.errors?.[0]?.path === '/body/bands/B04';
        // The detail names the band and the reason in words; the code is in errors[0].code only.
        const detail =
          typeof body.detail === 'string' && body.detail.startsWith('B04: ') && !/\[[a-z_]+\]/.test(body.detail);
        got.push(
          `${h.name} (${route}): ${res.status} ${problem && detail ? body.errors[0].code : JSON.stringify(body).slice(0, 300)}`,
        );
        expected.push(`${h.name} (${route}): 400 ${h.code}`);
      }
      got.push(`${h.name}: ${(await stored()).length} uploaded file(s) left`);
      expected.push(`${h.name}: 0 uploaded file(s) left`);
    }
    expect(got).toEqual(expected);
    expect(await count()).toBe(before);
    expect((await listOutbox(t.db, t.accountId)).length).toBe(events);
  }, 120_000);

  it('the limits still take real imagery: a 10980² Sentinel-2 band and a normal capture register, by path and uploaded', async () => {
    const normal = writeGeoTiff({
      width: 512,
      height: 512,
      data: Uint16Array.from({ length: 512 * 512 }, (_, i) => 500 + (i % 3000)),
      ...GRID,
    });
    for (const [name, buf] of [
      ['sentinel.tif', sentinelSizedBand()],
      ['normal.tif', normal],
    ] as const) {
      const file = path.join(root(), name);
      writeFileSync(file, buf);
      for (const { res, body } of [await byPath(file), await upload(buf)]) {
        expect(res.status, `${name}: ${JSON.stringify(body)}`).toBe(201);
        expect(body.fields, name).toHaveLength(1);
      }
    }
  }, 120_000);
});
