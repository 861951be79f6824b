/** The dashboard's legend draws the colours the tile endpoint paints: the same stops, the same choice per index. */
import { describe, expect, it } from 'vitest';
import { indexCatalog } from '../../../src/compute/catalog.js';
import { defaultStyle, RAMP_STOPS } from '../../../src/indices/ramps.js';
import { RAMPS, rampOf } from '../../../web/dashboard/ramp.js';

describe('dashboard legend ramps', () => {
  it('has the stops of every ramp the tiles use', () => {
    expect(RAMPS).toBe(RAMP_STOPS);
  });
  it('picks the ramp the tiles use for every catalogue index and for a custom formula', () => {
    for (const entry of indexCatalog) expect(rampOf(entry.range), entry.name).toBe(defaultStyle(entry.name).ramp);
    expect(rampOf(undefined)).toBe(defaultStyle('custom').ramp);
  });
});
