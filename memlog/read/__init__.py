"""Read: the inputs a user names (files, `-`, directories, URLs) into numbered lines, chunk by
chunk: gzip kept up to its damage, standard input spooled so evidence can be quoted, lines
hard-wrapped by a terminal joined back.

May import: memlog.base.
"""
