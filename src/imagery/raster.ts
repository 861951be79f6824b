/**
 * An open GeoTIFF: its RasterSource, its structure (checked against the decode limits before
 * geotiff.js parses any IFD: tiff-structure.ts) and geotiff.js over the same source, used through
 * its public API for the header, the georeferencing and the readRasters fallback. The raw-tile
 * reader (raw-window.ts) reads the first image's blocks through the source itself.
 */
import { GeoTIFF, type GeoTIFFImage } from 'geotiff';
import { HttpRangeSource } from './http-source.js';
import { LocalFileSource } from './local-source.js';
import { geotiffSource, type RasterSource } from './raster-source.js';
import { checkTiffStructure, type TiffStructure } from './tiff-structure.js';

export interface Raster {
  source: RasterSource;
  tiff: GeoTIFF;
  structure: TiffStructure;
}

/** The first image of a raster (the one read) with what the raw-tile reader needs beside it. */
export interface RasterImage {
  source: RasterSource;
  structure: TiffStructure;
  image: GeoTIFFImage;
}

export const isRemote = (href: string): boolean => /^https?:\/\//i.test(href);

/** The source for an href: an http(s) URL, else a local path the caller has resolved and checked (local-path.ts). */
export function openSource(href: string): Promise<RasterSource> {
  return isRemote(href) ? Promise.resolve(new HttpRangeSource(href)) : LocalFileSource.open(href);
}

/**
 * Opens a raster over `source`: geotiff.js reads the header (its own errors for a file that is not
 * a TIFF), then the structure is checked; the source is closed when either fails.
 */
export async function openRaster(source: RasterSource, signal?: AbortSignal): Promise<Raster> {
  try {
    const tiff = await GeoTIFF.fromSource(geotiffSource(source), undefined, signal);
    const structure = await checkTiffStructure(source, signal);
    return { source, tiff, structure };
  } catch (err) {
    await source.close().catch(() => {});
    throw err;
  }
}

export async function firstImage(raster: Raster): Promise<RasterImage> {
  return { source: raster.source, structure: raster.structure, image: await raster.tiff.getImage(0) };
}
