-- Webhooks, their deliveries (one per webhook and event) and every attempt of each delivery.
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  url text NOT NULL,
  events text[] NOT NULL,
  secret_sealed text NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'disabled')),
  disabled_reason text,
  disabled_at timestamptz,
  last_success_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_account_idx ON webhooks (account_id, created_at, id);

CREATE TABLE deliveries (
  id text PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  account_id text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  -- The exact bytes sent, so that every retry carries the same body and signature input.
  body text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
  -- attempt_count only grows (attempt numbers stay unique); cycle_base is where the current run of
  -- retries began (a replay or a manual retry starts a new run).
  attempt_count int NOT NULL DEFAULT 0,
  cycle_base int NOT NULL DEFAULT 0,
  -- A worker owns the next attempt until then; a crashed worker's claim simply expires.
  claimed_until timestamptz,
  next_attempt_at timestamptz,
  first_attempt_at timestamptz,
  last_error text,
  stopped_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX deliveries_webhook_idx ON deliveries (webhook_id, created_at, id);
CREATE INDEX deliveries_pending_idx ON deliveries (next_attempt_at) WHERE status = 'pending';

CREATE TABLE delivery_attempts (
  delivery_id text NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
  attempt int NOT NULL,
  attempted_at timestamptz NOT NULL,
  status_code int,
  error text,
  latency_ms double precision NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);
