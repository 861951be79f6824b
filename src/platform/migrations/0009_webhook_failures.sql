-- Failed delivery attempts of a webhook in a row, across all its deliveries, in the order their
-- outcomes were recorded: a 2xx sets it to 0, each failure adds 1, and at 5 the webhook is
-- disabled (delivery.ts). Updated in the statement that records the attempts, so concurrent
-- workers never lose a count (the row lock orders them).
ALTER TABLE webhooks ADD COLUMN consecutive_failures int NOT NULL DEFAULT 0;
