-- Batch statistics (issue 22): a chunk's rows in parts of about BATCH_PART_BYTES (whole rows), so
-- that the file is assembled in parts of that size and the download holds one part, not a chunk's
-- rows. A body stored before is one part.
ALTER TABLE batch_chunks ALTER COLUMN body TYPE text[] USING CASE WHEN body IS NULL THEN NULL ELSE ARRAY[body] END;
