-- The times of each partner's admitted webhook actions (`test`, `resend`, `recover`;
-- extensions.md §12), shared by every instance. Which call is admitted is the domain's rule
-- (`ActionBudget`); the row is locked while it decides.
CREATE TABLE webhook_action_budgets (
    partner_id text PRIMARY KEY REFERENCES partners (partner_id) ON DELETE CASCADE,
    calls      timestamptz[] NOT NULL
);
