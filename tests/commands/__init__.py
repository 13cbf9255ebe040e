"""The command line (memlog/commands/, memlog/cli.py): options, errors, the README's examples."""
