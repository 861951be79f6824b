/**
 * Registering synthetic Sentinel-2 captures (src/imagery/synthetic.ts) through `POST /v1/imagery`,
 * as a user would: the bands, the SCL mask and the L2A offset.
 */
import type { SyntheticCapture } from '../../src/imagery/synthetic.js';
import type { TestApp } from './app.js';

/** Registers one capture; its imagery id. Throws with the answer's body unless it is 201. */
export async function registerCapture(t: TestApp, c: SyntheticCapture): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/imagery',
    headers: t.auth(),
    payload: {
      source: 'sentinel-2-l2a',
      capture_date: c.date,
      bands: c.files,
      mask: { href: c.scl, kind: 'scl' },
      offset: -0.1,
    },
  });
  if (res.statusCode !== 201) throw new Error(`POST /v1/imagery ${c.date}: ${res.statusCode} ${res.body}`);
  return res.json().id as string;
}

/** Registers the captures one after another; their imagery ids in the same order. */
export async function registerCaptures(t: TestApp, caps: SyntheticCapture[]): Promise<string[]> {
  const ids: string[] = [];
  for (const c of caps) ids.push(await registerCapture(t, c));
  return ids;
}
