-- The embedded job queue (used when REDIS_URL is not set): durable, leased, retried.
CREATE TABLE jobs (
  queue text NOT NULL,
  id text NOT NULL,
  data jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('waiting', 'active', 'completed', 'failed')),
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts_made int NOT NULL DEFAULT 0,
  max_attempts int NOT NULL DEFAULT 1,
  backoff_ms int[] NOT NULL DEFAULT '{}',
  -- A process that dies while handling a job leaves an expired lease: the job is claimed again.
  stalls int NOT NULL DEFAULT 0,
  locked_until timestamptz,
  locked_by text,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  PRIMARY KEY (queue, id)
);
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE state = 'waiting';
CREATE INDEX jobs_active_idx ON jobs (queue, locked_until) WHERE state = 'active';
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;
