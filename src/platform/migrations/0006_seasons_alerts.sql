-- season.started / season.ended are emitted once per field and date: the row is the proof.
CREATE TABLE season_events (
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('started', 'ended')),
  date date NOT NULL,
  emitted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (field_id, kind, date)
);

CREATE TABLE alert_rules (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  alert_type text NOT NULL CHECK (alert_type IN ('crop_health', 'water_stress')),
  index_name text NOT NULL,
  operator text NOT NULL CHECK (operator IN ('below', 'above')),
  threshold double precision NOT NULL,
  breached boolean NOT NULL DEFAULT false,
  last_value double precision,
  last_evaluated_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_rules_field_idx ON alert_rules (field_id);

CREATE TABLE alert_history (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  alert_id text NOT NULL,
  field_id text NOT NULL,
  alert_type text NOT NULL,
  index_name text NOT NULL,
  value double precision NOT NULL,
  threshold double precision NOT NULL,
  imagery_id text,
  triggered_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_history_account_idx ON alert_history (account_id, triggered_at);
