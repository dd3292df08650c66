-- An `ask_user_question_kandev` record is written only by its session's consumer, from
-- agentctl's `ask_user_question_settled` (docs/architecture.md §3): the claim an answer's
-- handler took to deliver it is gone, and so are its columns.

ALTER TABLE clarifications DROP COLUMN claim;
ALTER TABLE clarifications DROP COLUMN claimed_at;
