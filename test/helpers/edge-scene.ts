/**
 * The service with one synthetic capture and one field over it, in a scratch directory: what the
 * bad-input suites need to send every kind of request somewhere real.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { datesEvery, sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { buildTestApp, type TestApp } from './app.js';
import type { DbBackend } from './backends.js';

export interface EdgeScene {
  t: TestApp;
  /** The field over the capture. */
  fieldId: string;
  /** The capture of 2025-06-01 (its files are not registered). */
  cap: SyntheticCapture;
  /** Rows in a table of the scene's database. */
  count(table: string): Promise<number>;
  close(): Promise<void>;
}

export async function edgeScene(
  backend: DbBackend,
  opts: { prefix: string; seed: number; env?: Record<string, string> },
): Promise<EdgeScene> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), opts.prefix));
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 40, seed: opts.seed };
  const t = await buildTestApp(backend, {
    env: { DATA_DIR: path.join(scratch, 'data'), IMAGERY_ROOTS: path.join(scratch, 'src'), ...opts.env },
  });
  const [cap] = writeSyntheticSeason(
    path.join(scratch, 'src'),
    spec,
    datesEvery('2025-06-01', '2025-06-01', 1),
    '2025-04-01',
    '2025-09-30',
  ) as [SyntheticCapture];
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/fields',
    headers: t.auth(),
    payload: { name: 'scene', boundary: sceneField(spec) },
  });
  expect(res.statusCode, res.body).toBe(201);
  return {
    t,
    fieldId: res.json().id,
    cap,
    count: async (table) => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0]!.n,
    close: async () => {
      await t.close();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
