/**
 * The overlay's colour ramps for the legend, as the tile endpoint paints them (src/indices/ramps.ts,
 * whose stops test/unit/dashboard/ramp.test.ts checks these against): red–yellow–green for the
 * normalised differences (catalogue range −1..1) and custom formulas, viridis for the others.
 */
export const RAMPS = {
  rdylgn: [
    '#a50026',
    '#d73027',
    '#f46d43',
    '#fdae61',
    '#fee08b',
    '#ffffbf',
    '#d9ef8b',
    '#a6d96a',
    '#66bd63',
    '#1a9850',
    '#006837',
  ],
  viridis: ['#440154', '#472d7b', '#3b528b', '#2c728e', '#21918c', '#28ae80', '#5ec962', '#addc30', '#fde725'],
};

/** The ramp of an index: its catalogue range, or none for a custom formula. */
export function rampOf(range: readonly [number, number] | undefined): keyof typeof RAMPS {
  return !range || (range[0] === -1 && range[1] === 1) ? 'rdylgn' : 'viridis';
}

export function rampCss(stops: string[]): string {
  return `linear-gradient(to right, ${stops.join(', ')})`;
}
