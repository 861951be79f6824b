-- Imagery subscriptions (issue 18): a STAC API the service searches over the account's fields, and
-- the captures it registered from it.
CREATE TABLE imagery_subscriptions (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  stac_api_url text NOT NULL,
  collection text NOT NULL,
  -- a preset name ("earth-search", "planetary-computer", "cdse") or {"B04": "red", ...}
  assets jsonb NOT NULL,
  max_cloud_cover double precision,
  start_date date NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'paused')),
  -- set by configuration (DEFAULT_SUBSCRIPTION_*): one per account, created by the service
  is_default boolean NOT NULL DEFAULT false,
  -- the newest Item datetime stored so far: the next poll searches from here (minus a look-back)
  cursor timestamptz,
  last_polled_at timestamptz,
  last_error text,
  items_registered int NOT NULL DEFAULT 0,
  -- the newest Item datetime seen (lag = now - this)
  newest_item_at timestamptz,
  -- a poll in progress holds the subscription until then (a killed worker's lease runs out)
  lease_until timestamptz,
  lease_owner text,
  -- after a failed poll (5xx, timeout, 429): not polled again before this
  next_poll_at timestamptz,
  failures int NOT NULL DEFAULT 0,
  -- POST .../poll: poll at the scheduler's next turn whatever the interval
  poll_requested_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX imagery_subscriptions_account_idx ON imagery_subscriptions (account_id, created_at, id);
CREATE UNIQUE INDEX imagery_subscriptions_default_idx ON imagery_subscriptions (account_id) WHERE is_default;

-- The fields a subscription has searched back to its start date (the backfill of a new field).
CREATE TABLE imagery_subscription_fields (
  subscription_id text NOT NULL REFERENCES imagery_subscriptions(id) ON DELETE CASCADE,
  field_id text NOT NULL REFERENCES fields(id) ON DELETE CASCADE,
  backfilled_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (subscription_id, field_id)
);

-- A capture registered from a STAC Item: at most one per account, collection and Item id, so that
-- two workers polling at once (or a poll repeated after a crash) register and announce it once.
ALTER TABLE imagery ADD COLUMN stac_collection text;
ALTER TABLE imagery ADD COLUMN stac_item_id text;
ALTER TABLE imagery ADD COLUMN subscription_id text REFERENCES imagery_subscriptions(id) ON DELETE SET NULL;
CREATE UNIQUE INDEX imagery_stac_item_idx ON imagery (account_id, stac_collection, stac_item_id)
  WHERE stac_item_id IS NOT NULL;
