-- Registered captures (one satellite scene or drone flight) and, per field they cover, the
-- field's own share of unusable pixels.
CREATE TABLE imagery (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  source text NOT NULL,
  capture_date date NOT NULL,
  cloud_cover double precision,
  bands jsonb NOT NULL,
  mask jsonb,
  scale double precision NOT NULL,
  "offset" double precision NOT NULL,
  epsg int NOT NULL,
  resolution double precision NOT NULL,
  footprint jsonb NOT NULL,
  bbox double precision[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX imagery_account_date_idx ON imagery (account_id, capture_date);

CREATE TABLE imagery_fields (
  imagery_id text NOT NULL REFERENCES imagery(id) ON DELETE CASCADE,
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  field_pixels int NOT NULL,
  valid_pixels int NOT NULL,
  cloud_cover double precision NOT NULL,
  PRIMARY KEY (imagery_id, field_id)
);
CREATE INDEX imagery_fields_field_idx ON imagery_fields (field_id);
