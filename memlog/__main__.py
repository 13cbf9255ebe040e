"""`python -m memlog ...`: the same command line as the `memlog` script."""

from memlog.cli import main

main()
