#!/usr/bin/env python3
"""GDAL's side of bench/decode.ts. `write RAW W H OUT OPTIONS...` compresses a raw little-endian
uint16 file into a tiled GeoTIFF; `time RUNS FILE...` decodes each file's first band in full, on
one thread, RUNS times (reopened each time, so nothing comes from GDAL's block cache; into one
reused array, as bench/decode.ts does on our side) and prints
one JSON object: file -> [wall seconds, CPU seconds] per run (medians). CPU time is steadier than
wall time on a machine shared with other work."""
import json
import statistics
import sys
import time

from osgeo import gdal, osr

gdal.UseExceptions()
gdal.SetConfigOption("GDAL_NUM_THREADS", "1")
gdal.SetConfigOption("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
gdal.SetCacheMax(16 * 1024 * 1024)


def write(raw, w, h, out, options):
    import numpy as np

    data = np.fromfile(raw, dtype="<u2").reshape(int(h), int(w))
    ds = gdal.GetDriverByName("GTiff").Create(out, int(w), int(h), 1, gdal.GDT_UInt16, options)
    ds.SetGeoTransform([500000, 10, 0, 5600000, 0, -10])
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32632)
    ds.SetProjection(srs.ExportToWkt())
    ds.GetRasterBand(1).WriteArray(data)
    ds = None


def timed(runs, files):
    out = {}
    for f in files:
        wall, cpu = [], []
        into = None
        for _ in range(runs):
            t = time.perf_counter()
            c = time.process_time()
            ds = gdal.Open(f)
            band = ds.GetRasterBand(1)
            if into is None:
                import numpy as np

                into = np.empty((ds.RasterYSize, ds.RasterXSize), dtype=np.uint16)
            band.ReadAsArray(buf_obj=into)
            ds = None
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
        out[f] = [statistics.median(wall), statistics.median(cpu)]
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    else:
        timed(int(sys.argv[2]), sys.argv[3:])
