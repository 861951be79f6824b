-- Accounts, API keys, fields and the events outbox.
CREATE TABLE accounts (
  id text PRIMARY KEY,
  name text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as SHA-256 hashes of the whole key; `prefix` is the public part shown in listings.
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  prefix text NOT NULL,
  key_hash text NOT NULL UNIQUE,
  label text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id);

CREATE TABLE fields (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL,
  boundary jsonb NOT NULL,
  bbox double precision[] NOT NULL,
  area_ha double precision NOT NULL,
  crop_type text,
  planting_date date,
  harvest_date date,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fields_account_created_idx ON fields (account_id, created_at, id);

-- Transactional outbox: written in the same transaction as the state change that emits the event.
CREATE TABLE outbox (
  id text PRIMARY KEY,
  seq bigserial UNIQUE,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  type text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz
);
CREATE INDEX outbox_undispatched_idx ON outbox (seq) WHERE dispatched_at IS NULL;

-- Service-wide settings shared by every replica (e.g. a generated signing key when none is configured).
CREATE TABLE settings (
  key text PRIMARY KEY,
  value text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
