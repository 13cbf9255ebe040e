"""Performance benchmark for `memlog analyze` against ripgrep (issue 6): generate.py writes large
realistic logs, run.py times memlog and `rg -c` on them, profile_stages.py shows where memlog's time goes."""
