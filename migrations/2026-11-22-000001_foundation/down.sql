DROP TABLE sub_accounts;
DROP TABLE api_tokens;
DROP TABLE portal_users;
DROP TABLE care_service_flags;
DROP TABLE partners;
