/**
 * Independent reference tools from Debian (GDAL's utilities, rasterio). Locally a test whose tool is
 * missing is skipped with a message; in CI (`CI` set, as `.ci/run` runs) a missing tool fails the
 * run, since `.ci/run` installs them and a check that silently skips there proves nothing.
 */
import { execFileSync } from 'node:child_process';

export function toolAvailable(what: string, install: string, probe: () => void): boolean {
  try {
    probe();
    return true;
  } catch {
    if (process.env.CI) throw new Error(`[test] ${what} is required in CI but missing (apt-get install ${install})`);
    console.warn(`[test] ${what} not found: the checks that use it are SKIPPED (apt-get install ${install})`);
    return false;
  }
}

export const hasGdal = (): boolean =>
  toolAvailable('GDAL (gdalinfo, gdal_translate, ogr2ogr)', 'gdal-bin', () => {
    for (const tool of ['gdalinfo', 'gdal_translate', 'ogr2ogr'])
      execFileSync(tool, ['--version'], { stdio: 'ignore' });
  });

export const hasRasterio = (): boolean =>
  toolAvailable('python3-rasterio', 'python3-rasterio', () =>
    execFileSync('/usr/bin/python3', ['-c', 'import rasterio'], { stdio: 'ignore' }),
  );

/** promtool and prometheus (Debian's `prometheus` package provides both). */
export const hasPromtool = (): boolean =>
  toolAvailable('promtool', 'prometheus', () => execFileSync('promtool', ['--version'], { stdio: 'ignore' }));

export const hasPrometheus = (): boolean =>
  toolAvailable('prometheus', 'prometheus', () => execFileSync('prometheus', ['--version'], { stdio: 'ignore' }));

/** GDAL's Python API with its COG validator (Debian python3-gdal: osgeo_utils/samples). */
export const hasPythonGdal = (): boolean =>
  toolAvailable('python3-gdal (osgeo, osgeo_utils COG validator)', 'python3-gdal', () =>
    execFileSync(
      '/usr/bin/python3',
      ['-c', 'import osgeo.gdal, osgeo_utils.samples.validate_cloud_optimized_geotiff'],
      { stdio: 'ignore' },
    ),
  );

/** Runs test/helpers/gdal_raster.py (GDAL's Python API) and parses its JSON. */
export function gdalRaster<T = unknown>(...args: string[]): T {
  const script = new URL('./gdal_raster.py', import.meta.url).pathname;
  return JSON.parse(
    execFileSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8', maxBuffer: 256 << 20 }),
  ) as T;
}

/** Debian's chromium, which the dashboard's browser tests drive with playwright-core. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = (): boolean =>
  toolAvailable('chromium (headless browser)', 'chromium', () =>
    execFileSync(CHROMIUM, ['--version'], { stdio: 'ignore' }),
  );
