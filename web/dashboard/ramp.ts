/**
 * The overlay's colour ramps for the legend: the tile endpoint's own stops (src/indices/ramp-stops.ts,
 * bundled in); test/unit/dashboard/ramp.test.ts checks the choice per index: red–yellow–green for the
 * normalised differences (catalogue range −1..1) and custom formulas, viridis for the others.
 */
import { RAMP_STOPS } from '../../src/indices/ramp-stops.js';

export const RAMPS = RAMP_STOPS;

/** The ramp of an index: its catalogue range, or none for a custom formula. */
export function rampOf(range: readonly [number, number] | undefined): keyof typeof RAMPS {
  return !range || (range[0] === -1 && range[1] === 1) ? 'rdylgn' : 'viridis';
}

export function rampCss(stops: string[]): string {
  return `linear-gradient(to right, ${stops.join(', ')})`;
}
