"""Privacy: accounting (budgets, accountants, conversions), mechanisms, and a release's randomness."""
