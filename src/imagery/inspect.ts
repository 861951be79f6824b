/**
 * Checks the files of a capture before it is registered: each opens as a GeoTIFF, is
 * georeferenced in a supported CRS, has the band index asked for, and decodes (a small window:
 * catches corrupt and truncated files); all bands share the CRS and their resolutions divide
 * each other. Runs in a worker thread (it decodes pixels).
 */
import { CrsError, crsLabel, type CrsRef } from './crs.js';
import { ImageryLimitError, withDecodeBudget } from './decode-limits.js';
import { crsFromGeoKeys } from './geokeys.js';
import { firstImage, type RasterImage } from './raster.js';
import { readWindow } from './raw-window.js';
import { ImageryError, openTiff, undecodable, type CaptureSource } from './window-reader.js';
import type { InspectResult } from '../compute/tasks.js';

/** The checks of one registration decode within one IMAGERY_MAX_DECODED_BYTES budget. */
export function inspectCapture(capture: CaptureSource, roots: string[]): Promise<InspectResult> {
  return withDecodeBudget(() => inspectIn(capture, roots));
}

async function inspectIn(capture: CaptureSource, roots: string[]): Promise<InspectResult> {
  const out: InspectResult['bands'] = {};
  const entries: Array<[string, { href: string; index?: number }]> = [
    ...Object.entries(capture.bands),
    ...(capture.mask ? [['mask', capture.mask] as [string, { href: string; index?: number }]] : []),
  ];
  // Every file at once (each is a few round trips away over HTTP); the first failure in band order
  // is the one reported, as when they were checked one after another.
  const checked = await Promise.allSettled(entries.map(([band, src]) => inspectBand(band, src, roots)));
  for (const [k, r] of checked.entries()) {
    if (r.status === 'rejected') throw r.reason;
    out[entries[k]![0]] = r.value;
  }
  const list = Object.entries(out);
  const [firstName, first] = list[0]!;
  for (const [band, b] of list) {
    if (b.epsg !== first.epsg)
      throw new ImageryError(
        band,
        `CRS ${crsLabel(b.epsg)} differs from ${firstName}'s ${crsLabel(first.epsg)}: all bands must share one CRS`,
      );
    const ratio = Math.abs(b.resX) / Math.abs(first.resX);
    const r = ratio >= 1 ? ratio : 1 / ratio;
    if (Math.abs(r - Math.round(r)) > 1e-6)
      throw new ImageryError(
        band,
        `resolution ${Math.abs(b.resX)} does not divide ${firstName}'s ${Math.abs(first.resX)}: bands must line up`,
      );
  }
  return { bands: out };
}

/** One file of the capture: opens, is georeferenced in a supported CRS, has the band, decodes. */
async function inspectBand(
  band: string,
  src: { href: string; index?: number },
  roots: string[],
): Promise<InspectResult['bands'][string]> {
  let raster: RasterImage;
  try {
    raster = await firstImage(await openTiff(src.href, roots));
  } catch (err) {
    throw new ImageryError(band, describeOpenError(err as Error));
  }
  const { image } = raster;
  let epsg: CrsRef;
  try {
    epsg = crsFromGeoKeys(image.getGeoKeys() as Record<string, unknown> | null);
  } catch (err) {
    throw new ImageryError(band, err instanceof CrsError ? `unsupported CRS: ${err.message}` : (err as Error).message);
  }
  let origin: number[], res: number[];
  try {
    origin = image.getOrigin();
    res = image.getResolution();
  } catch {
    throw new ImageryError(
      band,
      'the file is not georeferenced (no ModelTiepoint/ModelPixelScale or ModelTransformation)',
    );
  }
  const samples = image.getSamplesPerPixel();
  const index = src.index ?? 1;
  if (!Number.isInteger(index) || index < 1 || index > samples)
    throw new ImageryError(band, `band index ${index} does not exist: the file has ${samples} band(s)`);
  const bits = image.getBitsPerSample(0);
  const fmt = image.getSampleFormat(0);
  const dtype =
    fmt === 1 && bits === 16
      ? 'u16'
      : fmt === 2 && bits === 16
        ? 'i16'
        : fmt === 1 && bits === 8
          ? 'u8'
          : fmt === 3 && bits === 32
            ? 'f32'
            : null;
  if (!dtype)
    throw new ImageryError(
      band,
      `unsupported sample type (format ${fmt}, ${bits} bits): use uint16, int16, uint8 or float32`,
    );
  const w = image.getWidth();
  const h = image.getHeight();
  try {
    // The last rows: a truncated file fails there, a corrupt one anywhere it is read.
    await readWindow(raster, [0, Math.max(0, h - 1), Math.min(w, 64), h], index - 1);
    await readWindow(raster, [0, 0, Math.min(w, 64), Math.min(h, 1)], index - 1);
  } catch (err) {
    throw new ImageryError(band, undecodable(err as Error));
  }
  return {
    epsg,
    width: w,
    height: h,
    resX: res[0]!,
    resY: res[1]!,
    originX: origin[0]!,
    originY: origin[1]!,
    dtype,
    samples,
  };
}

function describeOpenError(err: Error): string {
  if (err instanceof ImageryLimitError) return err.message;
  const m = err.message || String(err);
  if (/outside the allowed/.test(m)) return m;
  if (/not found|ENOENT/.test(m)) return m.includes('file not found') ? m : `file not found`;
  if (/not a public address/.test(m)) return `the URL is refused: ${m}`;
  if (/fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|status/i.test(m))
    return `the URL cannot be read (${m})`;
  return `not a readable GeoTIFF (${m})`;
}
