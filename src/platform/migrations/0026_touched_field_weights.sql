-- Fields with no pixel centre of a capture inside (a sliver, a polygon within one pixel) that touch
-- its pixels (issue 23): linked with field_pixels = valid_pixels = 0 and the weights of the pixels
-- they touch (each the share of its area inside, as weighting=coverage reads them) and of the
-- usable ones; cloud_cover is then 1 - valid_weight / field_weight. Null for every other link.
ALTER TABLE imagery_fields ADD COLUMN field_weight double precision;
ALTER TABLE imagery_fields ADD COLUMN valid_weight double precision;
