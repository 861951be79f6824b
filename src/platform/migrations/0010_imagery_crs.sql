-- A capture's CRS may be user-defined in its GeoKeys (no EPSG code): its proj4 definition is kept
-- in crs, and epsg is null then.
ALTER TABLE imagery ALTER COLUMN epsg DROP NOT NULL;
ALTER TABLE imagery ADD COLUMN crs text;
