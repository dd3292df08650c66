-- The same change as migrations/sqlite/0007_no_answer_claims.sql, which explains it.

ALTER TABLE clarifications DROP COLUMN claim;
ALTER TABLE clarifications DROP COLUMN claimed_at;
