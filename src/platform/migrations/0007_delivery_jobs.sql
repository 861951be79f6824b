-- The id of the queue job that will make a delivery's next attempt: the sweeper re-queues a
-- delivery only when that job no longer exists (lost with a crashed process or a flushed queue).
ALTER TABLE deliveries ADD COLUMN job_id text;
