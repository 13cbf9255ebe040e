"""`python -m memlog`: the same command as the `memlog` script."""

from memlog.cli import main

main()
