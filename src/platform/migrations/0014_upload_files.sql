-- Uploaded files (POST /v1/imagery/upload), kept in the database in chunks so that every process of
-- the deployment reads them, whatever machine received them (platform/file-store.ts). A capture
-- names one as `upload://<id>`; each process copies it into its local read cache before a compute
-- thread reads it (platform/file-cache.ts).
CREATE TABLE upload_files (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- size and sha256 are set when the last chunk is written (completed_at); null while it streams in
  size bigint,
  sha256 text,
  chunk_size int NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX upload_files_created_idx ON upload_files (created_at);

CREATE TABLE upload_chunks (
  file_id text NOT NULL REFERENCES upload_files(id) ON DELETE CASCADE,
  n int NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (file_id, n)
);
-- GeoTIFF bands are compressed already: out of line, without another compression attempt.
ALTER TABLE upload_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
