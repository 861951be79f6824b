#!/usr/bin/env python3
"""The peer for bench/http.ts: the same NDVI zonal statistics for the same field from the same
files with rasterio and numpy, the way a Python service would answer one request (open, read the
window, mask, compute). Prints one JSON line: runs per second and the statistics.

With `@job.json` whose mode is "batch" (bench/batch.ts): the loop a Python script over rasterio
runs for many parcels over a season. Every capture's files opened once; per parcel, its geometry
reprojected, its window and inside mask made once; per capture, the window of red, NIR and SCL
read, masked and the NDVI statistics computed. Prints seconds, CPU seconds, peak RSS and every
(parcel, capture date) mean."""
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


def batch(job):
    import resource

    caps = []
    for c in job["captures"]:
        caps.append((c["date"], rasterio.open(c["B04"]), rasterio.open(c["B08"]), rasterio.open(c["SCL"])))
    ref = caps[0][1]
    t = time.perf_counter()
    cpu = time.process_time()
    means = {}
    for i, parcel in enumerate(job["parcels"]):
        geom = transform_geom("EPSG:4326", ref.crs, parcel)
        win = geometry_window(ref, [geom], pad_x=1, pad_y=1)
        transform = ref.window_transform(win)
        inside = None
        for date, red_ds, nir_ds, scl_ds in caps:
            red = red_ds.read(1, window=win, boundless=True, fill_value=0).astype(np.float64)
            nir = nir_ds.read(1, window=win, boundless=True, fill_value=0).astype(np.float64)
            if inside is None:
                inside = ~geometry_mask([geom], out_shape=red.shape, transform=transform, all_touched=False)
            scl_win = rasterio.windows.from_bounds(*rasterio.windows.bounds(win, red_ds.transform), transform=scl_ds.transform)
            scl = scl_ds.read(1, window=scl_win, out_shape=red.shape, resampling=Resampling.nearest, boundless=True, fill_value=0)
            valid = inside & (red != 0) & (nir != 0) & ~np.isin(scl, MASKED_SCL)
            if not valid.any():
                continue
            r = red[valid] * 0.0001 - 0.1
            n = nir[valid] * 0.0001 - 0.1
            ndvi = (n - r) / (n + r)
            ndvi = ndvi[np.isfinite(ndvi)]
            if ndvi.size:
                means[f"p{i}|{date}"] = float(ndvi.mean())
    dt = time.perf_counter() - t
    print(json.dumps({
        "seconds": dt,
        "cpu_seconds": time.process_time() - cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "means": means,
    }))


def main():
    arg = sys.argv[1]
    job = json.loads(open(arg[1:]).read() if arg.startswith("@") else arg)
    if job.get("mode") == "batch":
        batch(job)
        return
    runs = int(job.get("runs", 50))
    once(job)  # warm the imports and the OS file cache
    t = time.perf_counter()
    for _ in range(runs):
        stats = once(job)
    dt = time.perf_counter() - t
    print(json.dumps({"runs_per_s": runs / dt, "ms_per_run": 1000 * dt / runs, **stats}))


if __name__ == "__main__":
    main()
