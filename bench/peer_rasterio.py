#!/usr/bin/env python3
"""The peer for bench/http.ts: the same NDVI zonal statistics for the same field from the same
files with rasterio and numpy, the way a Python service would answer one request (open, read the
window, mask, compute). Prints one JSON line: runs per second and the statistics."""
import json
import sys
import time

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.features import geometry_mask, geometry_window
from rasterio.warp import transform_geom

MASKED_SCL = [0, 1, 3, 8, 9, 10, 11]


def once(job):
    with rasterio.open(job["B04"]) as red_ds, rasterio.open(job["B08"]) as nir_ds, rasterio.open(job["SCL"]) as scl_ds:
        geom = transform_geom("EPSG:4326", red_ds.crs, job["field"])
        win = geometry_window(red_ds, [geom], pad_x=1, pad_y=1)
        red = red_ds.read(1, window=win).astype(np.float64)
        nir = nir_ds.read(1, window=win).astype(np.float64)
        transform = red_ds.window_transform(win)
        inside = ~geometry_mask([geom], out_shape=red.shape, transform=transform, all_touched=False)
        scl_win = rasterio.windows.from_bounds(*rasterio.windows.bounds(win, red_ds.transform), transform=scl_ds.transform)
        scl = scl_ds.read(1, window=scl_win, out_shape=red.shape, resampling=Resampling.nearest)
        valid = inside & (red != 0) & (nir != 0) & ~np.isin(scl, MASKED_SCL)
        r = red[valid] * 0.0001 - 0.1
        n = nir[valid] * 0.0001 - 0.1
        ndvi = (n - r) / (n + r)
        return {"count": int(ndvi.size), "min": float(ndvi.min()), "max": float(ndvi.max()), "mean": float(ndvi.mean()), "std": float(ndvi.std())}


def main():
    job = json.loads(sys.argv[1])
    runs = int(job.get("runs", 50))
    once(job)  # warm the imports and the OS file cache
    t = time.perf_counter()
    for _ in range(runs):
        stats = once(job)
    dt = time.perf_counter() - t
    print(json.dumps({"runs_per_s": runs / dt, "ms_per_run": 1000 * dt / runs, **stats}))


if __name__ == "__main__":
    main()
