-- Zonal statistics per (capture, field boundary, formula): a repeated or overlapping time series
-- costs no pixel work. The boundary hash keys out stale entries when a field's boundary changes.
CREATE TABLE index_stats (
  imagery_id text NOT NULL REFERENCES imagery(id) ON DELETE CASCADE,
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  boundary_hash text NOT NULL,
  formula_hash text NOT NULL,
  stats jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (imagery_id, field_id, boundary_hash, formula_hash)
);

-- Custom index results stored by POST /v1/fields/{id}/indices/custom.
CREATE TABLE custom_indices (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  name text NOT NULL,
  formula text NOT NULL,
  date date NOT NULL,
  imagery_id text NOT NULL,
  zonal_stats jsonb NOT NULL,
  geojson text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX custom_indices_field_idx ON custom_indices (field_id, created_at, id);
