-- A cloud mask chosen per imagery subscription (issue 23): the SCL classes left out (null: the
-- default, 0, 1, 3, 8, 9, 10, 11) and a dilation in metres around clouds and shadows (null: none).
-- The captures it registers have their field cloud cover (imagery_fields) counted under that mask,
-- which each capture keeps in coverage_mask (null: the default mask), so that a field added later
-- is counted under the same mask.
ALTER TABLE imagery_subscriptions ADD COLUMN scl_exclude integer[];
ALTER TABLE imagery_subscriptions ADD COLUMN cloud_dilation_m double precision;
ALTER TABLE imagery ADD COLUMN coverage_mask jsonb;
