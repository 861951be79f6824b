/**
 * Whether GDAL's command-line tools are installed (Debian's gdal-bin; CI has them). Suites that
 * check against GDAL skip without them, and say so once with what they skip.
 */
import { execFileSync } from 'node:child_process';

export function gdalAvailable(skipped: string): boolean {
  try {
    execFileSync('gdalinfo', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn(`[test] gdalinfo not found: ${skipped} SKIPPED (apt-get install gdal-bin)`);
    return false;
  }
}
