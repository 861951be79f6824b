/**
 * A field's cloud cover under a chosen mask (issue 23): the captures' field and usable pixel
 * counts recomputed with the request's excluded SCL classes and dilation, so that the capture
 * choice (selection.ts) and the time series' cloud cover follow the mask used. The registered
 * counts (imagery_fields) are the default mask's; with the default mask nothing is recomputed.
 * Counts are read as registration reads them (the coverage bands, pixel centres), in the pool,
 * and kept per field state (a new state, see field-state.ts, starts empty) and mask.
 */
import type { MaskRequest } from '../compute/tasks.js';
import { coverageBands } from '../imagery/index.js';
import type { Candidate } from './selection.js';
import type { FieldState, IndexDeps } from './types.js';

type Counts = Pick<Candidate, 'field_pixels' | 'valid_pixels' | 'field_weight' | 'valid_weight'>;

const known = new WeakMap<FieldState, Map<string, Promise<Counts>>>();

/** The candidates with their counts under `mask` (the same objects when `maskKey` is '', the default). */
export async function underMask(
  deps: IndexDeps,
  state: FieldState,
  candidates: Candidate[],
  mask: MaskRequest,
  maskKey: string,
): Promise<Candidate[]> {
  if (!maskKey || !candidates.length) return candidates;
  let per = known.get(state);
  if (!per) {
    per = new Map();
    known.set(state, per);
  }
  const cache = per;
  return Promise.all(
    candidates.map(async (c) => {
      const key = `${c.id}|${maskKey}`;
      let p = cache.get(key);
      if (!p) {
        const capture = state.sources.get(c.id)!;
        p = deps.compute
          .coverage({ capture, boundary: state.boundary, bands: coverageBands(capture), roots: deps.roots, mask })
          .then(
            (r): Counts => ({
              field_pixels: r.fieldPixels,
              valid_pixels: r.validPixels,
              field_weight: r.touched?.fieldWeight ?? null,
              valid_weight: r.touched?.validWeight ?? null,
            }),
          );
        cache.set(key, p);
        p.catch(() => cache.delete(key));
      }
      const r = await p.catch(
        (): Counts => ({
          field_pixels: c.field_pixels,
          valid_pixels: 0,
          ...(c.field_weight ? { valid_weight: 0 } : {}),
        }),
      );
      return { ...c, ...r };
    }),
  );
}
