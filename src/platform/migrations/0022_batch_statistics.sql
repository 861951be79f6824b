-- Batch statistics (POST /v1/batch/statistics): a job over many fields or ad-hoc polygons, split
-- into chunks that run on the `batch` queue. The request is kept resolved (indices, range,
-- options); the features in order (a registered field's id, or an ad-hoc polygon and, when it is
-- invalid, why); each chunk's result text, keyed by (job, chunk) so that a chunk run again
-- replaces its rows; then the file in parts, served by the signed download.
CREATE TABLE batch_jobs (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('pending', 'running', 'ready', 'failed', 'cancelled')),
  request jsonb NOT NULL,
  format text NOT NULL CHECK (format IN ('csv', 'ndjson')),
  feature_count int NOT NULL,
  chunk_count int NOT NULL,
  -- features × indices × intervals: the unit of progress
  total bigint NOT NULL,
  error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  expires_at timestamptz,
  filename text,
  content_type text,
  size_bytes bigint
);
CREATE INDEX batch_jobs_account_created_idx ON batch_jobs (account_id, created_at, id);

CREATE TABLE batch_features (
  job_id text NOT NULL REFERENCES batch_jobs(id) ON DELETE CASCADE,
  seq int NOT NULL,
  feature_id text NOT NULL,
  -- a registered field (fields), or an ad-hoc polygon (features)
  field_id text,
  boundary jsonb,
  error text,
  PRIMARY KEY (job_id, seq)
);

CREATE TABLE batch_chunks (
  job_id text NOT NULL REFERENCES batch_jobs(id) ON DELETE CASCADE,
  chunk int NOT NULL,
  first_seq int NOT NULL,
  end_seq int NOT NULL,
  done boolean NOT NULL DEFAULT false,
  units bigint NOT NULL DEFAULT 0,
  row_count int NOT NULL DEFAULT 0,
  body text,
  errors jsonb NOT NULL DEFAULT '[]',
  attempts int NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, chunk)
);

CREATE TABLE batch_files (
  job_id text NOT NULL REFERENCES batch_jobs(id) ON DELETE CASCADE,
  part int NOT NULL,
  content bytea NOT NULL,
  PRIMARY KEY (job_id, part)
);

CREATE TABLE batch_idempotency (
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  key text NOT NULL,
  body_hash text NOT NULL,
  job_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key)
);
