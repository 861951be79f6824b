"""Independent reads of the service's index rasters with GDAL's Python API (Debian python3-gdal).

Commands (JSON on stdout, NaN as null):
  validate FILE            GDAL's own COG validator (osgeo_utils.samples.validate_cloud_optimized_geotiff),
                           with the full check of the block order: {errors, warnings, details}
  read FILE                every band's pixels: {width, height, geotransform, bands: [[...], ...]}
  read-many FILE...        a list of those
  overviews FILE           band 1's overviews as GDAL reads them: [{width, height, values}]
  field-values TIF GEOJSON each per-pixel GeoJSON feature located in the TIF by its centre (reprojected with
                           OSR to the TIF's CRS, then the inverse geotransform): [[col, row, geojson value, tif value]]
  corners FILE             the WGS84 lon/lat of the raster's outline (16 points a side) reprojected with OSR
"""
import json
import math
import sys

from osgeo import gdal, osr

gdal.UseExceptions()


def clean(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def read(path):
    ds = gdal.Open(path)
    bands = []
    for b in range(1, ds.RasterCount + 1):
        arr = ds.GetRasterBand(b).ReadAsArray()
        bands.append([clean(float(v)) for v in arr.ravel().tolist()])
    return {"width": ds.RasterXSize, "height": ds.RasterYSize, "geotransform": list(ds.GetGeoTransform()), "bands": bands}


def overviews(path):
    ds = gdal.Open(path)  # kept referenced while its bands are read
    band = ds.GetRasterBand(1)
    out = []
    for i in range(band.GetOverviewCount()):
        o = band.GetOverview(i)
        out.append({"width": o.XSize, "height": o.YSize, "values": [clean(float(v)) for v in o.ReadAsArray().ravel().tolist()]})
    return out


def wgs84_to(ds):
    src = osr.SpatialReference()
    src.ImportFromEPSG(4326)
    src.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    dst = osr.SpatialReference(wkt=ds.GetProjection())
    dst.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    return osr.CoordinateTransformation(src, dst)


def field_values(tif, geojson):
    ds = gdal.Open(tif)
    gt = ds.GetGeoTransform()
    arr = ds.GetRasterBand(1).ReadAsArray()
    ct = wgs84_to(ds)
    with open(geojson) as f:
        fc = json.load(f)
    out = []
    for feat in fc["features"]:
        ring = feat["geometry"]["coordinates"][0][:4]
        pts = [ct.TransformPoint(lon, lat)[:2] for lon, lat in ring]
        x = sum(p[0] for p in pts) / 4
        y = sum(p[1] for p in pts) / 4
        col = int(math.floor((x - gt[0]) / gt[1]))
        row = int(math.floor((y - gt[3]) / gt[5]))
        v = float(arr[row, col]) if 0 <= row < ds.RasterYSize and 0 <= col < ds.RasterXSize else "outside"
        out.append([col, row, feat["properties"]["value"], clean(v) if v != "outside" else v])
    return out


def corners(path):
    ds = gdal.Open(path)
    gt = ds.GetGeoTransform()
    src = osr.SpatialReference(wkt=ds.GetProjection())
    src.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    dst = osr.SpatialReference()
    dst.ImportFromEPSG(4326)
    dst.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    ct = osr.CoordinateTransformation(src, dst)
    w, h = ds.RasterXSize, ds.RasterYSize
    pts = []
    for k in range(17):
        f = k / 16
        for i, j in ((f * w, 0), (f * w, h), (0, f * h), (w, f * h)):
            pts.append(ct.TransformPoint(gt[0] + i * gt[1], gt[3] + j * gt[5])[:2])
    return pts


def validate(path):
    from osgeo_utils.samples.validate_cloud_optimized_geotiff import validate as cog_validate

    warnings, errors, details = cog_validate(path, full_check=True)
    return {"errors": errors, "warnings": warnings, "details": details}


cmd = sys.argv[1]
if cmd == "validate":
    print(json.dumps(validate(sys.argv[2])))
elif cmd == "read":
    print(json.dumps(read(sys.argv[2])))
elif cmd == "overviews":
    print(json.dumps(overviews(sys.argv[2])))
elif cmd == "read-many":
    print(json.dumps([read(p) for p in sys.argv[2:]]))
elif cmd == "field-values":
    print(json.dumps(field_values(sys.argv[2], sys.argv[3])))
elif cmd == "corners":
    print(json.dumps(corners(sys.argv[2])))
else:
    sys.exit("unknown command " + cmd)
