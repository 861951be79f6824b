-- Reports: the request, its generation state and (once ready) the file, kept in the database so
-- that any replica can serve the download. No foreign key to fields: a report of a field deleted
-- while it waited must still exist to say why it failed.
CREATE TABLE reports (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  field_id text NOT NULL,
  type text NOT NULL CHECK (type IN ('scouting', 'seasonal', 'health_summary', 'prescription')),
  format text NOT NULL CHECK (format IN ('pdf', 'json', 'csv')),
  options jsonb NOT NULL DEFAULT '{}',
  status text NOT NULL CHECK (status IN ('pending', 'processing', 'ready', 'failed')),
  error text,
  -- The queue job that currently carries the report, and how many times a worker took it.
  job_id text,
  attempts int NOT NULL DEFAULT 0,
  -- Renewed while a worker generates; a stale one with no live job means the worker died.
  heartbeat_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz,
  expires_at timestamptz,
  filename text,
  content_type text,
  size_bytes int
);
CREATE INDEX reports_account_created_idx ON reports (account_id, created_at, id);
CREATE INDEX reports_unfinished_idx ON reports (updated_at) WHERE status IN ('pending', 'processing');

CREATE TABLE report_files (
  report_id text PRIMARY KEY REFERENCES reports(id) ON DELETE CASCADE,
  content bytea NOT NULL
);

-- Idempotency-Key of POST /v1/fields/{id}/reports: the same key and body within 24 h answer the
-- same report.
CREATE TABLE report_idempotency (
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  key text NOT NULL,
  body_hash text NOT NULL,
  report_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key)
);
