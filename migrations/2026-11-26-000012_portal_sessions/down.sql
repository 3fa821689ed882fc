DROP TABLE portal_codes;
DROP INDEX api_tokens_portal_of_idx;
ALTER TABLE api_tokens DROP COLUMN portal_of;
