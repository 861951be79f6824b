/**
 * The colour stops of the index ramps, on their own (no imports) so that the dashboard's legend
 * (web/dashboard/ramp.ts, bundled by esbuild) draws the very stops the tile endpoint paints
 * (ramps.ts).
 */
export type RampName = 'rdylgn' | 'viridis';

/** ColorBrewer RdYlGn (11 classes, diverging) and matplotlib's viridis (9 of its stops, sequential). */
export const RAMP_STOPS: Record<RampName, string[]> = {
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
