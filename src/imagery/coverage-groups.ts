/**
 * Groups of nearby fields whose coverage of a capture is computed by one compute task, which reads
 * the union of their windows once (window-reader.ts readFieldCoverages). Fields are put in square
 * cells of the capture's finest grid by the top-left corner of their window: at most MAX_CELL
 * pixels, a multiple of TILE (aligned with the file's tiles when their edge divides it), as equal
 * as that allows over the fields' extent (so that the groups' work is balanced across threads); the
 * only tiles two groups both read are those under fields that reach past their cell's right or
 * bottom edge. A cell whose
 * union would exceed MAX_PIXELS (large fields) is cut into several groups, which bounds a task's
 * memory; and when there are fewer groups than compute threads, the largest are halved so every
 * thread gets one.
 *
 * A tile under a field that straddles two groups' cells is read and decoded by both. A caller that
 * keeps every thread busy with other captures (a subscription poll registers several Items at
 * once) passes threads 1 and the WHOLE limits: larger cells, no halving, so that a tile is decoded
 * once per capture (the bench's 1,000 fields over a 32 km scene: one group instead of four, whose
 * shared tile row and column were 16 % more tiles inflated).
 */
import type { Boundary } from '../fields/index.js';
import { fromWgs84, type CrsRef } from './crs.js';

/** Largest cell edge in pixels of the finest grid. */
export const MAX_CELL = 2048;
/** Cell edges are multiples of this (the usual COG tile edge). */
const TILE = 256;
/** Largest union window of a group in pixels (a larger field goes alone, as its own window). */
export const MAX_PIXELS = 6_000_000;

export interface GroupLimits {
  /** Largest cell edge in pixels (a multiple of 256). */
  maxCell: number;
  /** Largest union window of a group in pixels. */
  maxPixels: number;
}

/**
 * Limits for coverage only, when other captures keep the threads busy: a coverage task holds one
 * byte per pixel of its union (the usable-pixel mask; blocks are decoded one at a time), so a
 * 4,096² cell costs 16 MiB where batch statistics' windows (every band, 2 bytes a pixel) keep
 * MAX_PIXELS.
 */
export const WHOLE: GroupLimits = { maxCell: 4096, maxPixels: 4096 * 4096 };

export interface GridInfo {
  epsg: CrsRef;
  originX: number;
  originY: number;
  resX: number;
  resY: number;
}

interface Win {
  i: number;
  /** The field's own top-left corner (pixels, unrounded). */
  c: number;
  r: number;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

interface Group {
  wins: Win[];
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

const area = (g: { x0: number; y0: number; x1: number; y1: number }) => (g.x1 - g.x0) * (g.y1 - g.y0);

function windowOf(i: number, boundary: Boundary, grid: GridInfo, project: (p: [number, number]) => number[]) {
  const rings = boundary.type === 'Polygon' ? boundary.coordinates : boundary.coordinates.flat();
  let x0 = Infinity,
    y0 = Infinity,
    x1 = -Infinity,
    y1 = -Infinity;
  for (const ring of rings) {
    for (const p of ring) {
      const [x, y] = project(p);
      const c = (x! - grid.originX) / grid.resX;
      const r = (y! - grid.originY) / grid.resY;
      x0 = Math.min(x0, c);
      x1 = Math.max(x1, c);
      y0 = Math.min(y0, r);
      y1 = Math.max(y1, r);
    }
  }
  if (![x0, y0, x1, y1].every(Number.isFinite)) return null;
  // The reader's window: one pixel of margin
  return {
    i,
    c: x0,
    r: y0,
    x0: Math.floor(x0) - 1,
    y0: Math.floor(y0) - 1,
    x1: Math.ceil(x1) + 1,
    y1: Math.ceil(y1) + 1,
  };
}

/** The union of the windows (a loop: spreading 120,000-odd arguments into Math.min overflows the stack). */
function extentOf(wins: Win[]): { x0: number; y0: number; x1: number; y1: number } {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const w of wins) {
    if (w.x0 < x0) x0 = w.x0;
    if (w.y0 < y0) y0 = w.y0;
    if (w.x1 > x1) x1 = w.x1;
    if (w.y1 > y1) y1 = w.y1;
  }
  return { x0, y0, x1, y1 };
}

function groupOf(wins: Win[]): Group {
  return { wins, ...extentOf(wins) };
}

/** The fields by cell: edges ≤ MAX_CELL, multiples of TILE, as equal as that allows over their extent. */
function cellsOf(wins: Win[], maxCell: number): Map<string, Win[]> {
  const cells = new Map<string, Win[]>();
  if (!wins.length) return cells;
  const all = extentOf(wins);
  const extent = Math.max(all.x1 - all.x0, all.y1 - all.y0);
  const cell = Math.min(maxCell, Math.max(TILE, Math.ceil(extent / Math.ceil(extent / maxCell) / TILE) * TILE));
  for (const w of wins) {
    // Half a pixel of tolerance: a field drawn on a pixel edge stays on its side after reprojection
    const key = `${Math.floor((w.r + 0.5) / cell)},${Math.floor((w.c + 0.5) / cell)}`;
    const list = cells.get(key);
    if (list) list.push(w);
    else cells.set(key, [w]);
  }
  return cells;
}

/**
 * The fields (indices into `boundaries`) in groups, each of nearby fields; every index appears
 * once. A boundary that cannot be projected goes alone (its task reports why).
 */
export function coverageGroups(
  boundaries: Boundary[],
  grid: GridInfo,
  threads: number,
  limits: GroupLimits = { maxCell: MAX_CELL, maxPixels: MAX_PIXELS },
): number[][] {
  const project = fromWgs84(grid.epsg) as (p: [number, number]) => number[];
  const alone: number[][] = [];
  const placed: Win[] = [];
  for (const [i, b] of boundaries.entries()) {
    let w: Win | null;
    try {
      w = windowOf(i, b, grid, project);
    } catch {
      w = null;
    }
    if (w) placed.push(w);
    else alone.push([i]);
  }
  const groups: Group[] = [];
  const cells = cellsOf(placed, limits.maxCell);
  for (const key of [...cells.keys()].sort()) {
    // Row by row inside the cell; a new group when the union would pass MAX_PIXELS (the union
    // grown field by field: recomputing it over the group for every field was quadratic)
    const wins = cells.get(key)!.sort((a, b) => a.y0 - b.y0 || a.x0 - b.x0);
    let cur: Group = { wins: [], x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity };
    for (const w of wins) {
      const grown = {
        x0: Math.min(cur.x0, w.x0),
        y0: Math.min(cur.y0, w.y0),
        x1: Math.max(cur.x1, w.x1),
        y1: Math.max(cur.y1, w.y1),
      };
      if (cur.wins.length && area(grown) > limits.maxPixels) {
        groups.push(cur);
        cur = { wins: [w], x0: w.x0, y0: w.y0, x1: w.x1, y1: w.y1 };
      } else {
        cur.wins.push(w);
        Object.assign(cur, grown);
      }
    }
    if (cur.wins.length) groups.push(cur);
  }
  // Fewer groups than threads: halve the largest across its longer side
  while (groups.length + alone.length < threads) {
    const k = groups.reduce(
      (best, g, j) => (g.wins.length > 1 && (best < 0 || area(g) > area(groups[best]!)) ? j : best),
      -1,
    );
    if (k < 0) break;
    const g = groups[k]!;
    const wide = g.x1 - g.x0 >= g.y1 - g.y0;
    const sorted = [...g.wins].sort((a, b) => (wide ? a.x0 - b.x0 || a.y0 - b.y0 : a.y0 - b.y0 || a.x0 - b.x0));
    const half = Math.ceil(sorted.length / 2);
    groups.splice(k, 1, groupOf(sorted.slice(0, half)), groupOf(sorted.slice(half)));
  }
  return [...groups.map((g) => g.wins.map((w) => w.i)), ...alone];
}
