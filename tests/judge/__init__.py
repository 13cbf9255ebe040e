"""Judging (memlog/judge/, rules/): statistics, the rules, verdicts on shapes and threads."""
