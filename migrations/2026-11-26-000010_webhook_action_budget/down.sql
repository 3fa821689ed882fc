DROP TABLE webhook_action_budgets;
