-- Prescription files for farm terminals: a zipped Shapefile and an ISOXML TaskData zip.
ALTER TABLE reports DROP CONSTRAINT reports_format_check;
ALTER TABLE reports ADD CONSTRAINT reports_format_check CHECK (format IN ('pdf', 'json', 'csv', 'shp', 'isoxml'));
