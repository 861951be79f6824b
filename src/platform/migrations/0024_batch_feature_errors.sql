-- Batch statistics (issue 22): the features refused when the job was made, found without reading
-- every feature of the job (each GET of a job counts and lists them; a job has up to 100,000).
CREATE INDEX batch_features_errors_idx ON batch_features (job_id, seq) WHERE error IS NOT NULL;
