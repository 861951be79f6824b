/** The overlay's colour ramp for the legend: low to high, as the tile endpoint paints it. */
export const RAMP = ['#a50026', '#f46d43', '#fee08b', '#d9ef8b', '#66bd63', '#006837'];

export function rampCss(stops: string[]): string {
  return `linear-gradient(to right, ${stops.join(', ')})`;
}
