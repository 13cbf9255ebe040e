"""Opening a local file a user names (a log, a config, a spec) so that the open and the read
always return: devices (`/dev/zero`, a terminal), sockets and other special files are refused
before anything is read, and a FIFO is read only once someone writes to it, waiting at most
FIFO_WAIT_S (opening a FIFO without a writer blocks forever; so does reading `/dev/zero` to its end).
Process substitution (`<(zcat run.log.gz)`) is a FIFO whose writer is already there: it is read."""

from __future__ import annotations

import os
import select
import stat
from typing import BinaryIO

# A writer that exists starts writing within seconds (process substitution, `cat log > fifo`);
# past this a FIFO is taken to have none.
FIFO_WAIT_S = 30.0


class SpecialFileError(ValueError):
    """Why the file is not read, in a phrase (the caller names the file)."""


def special_kind(mode: int) -> str | None:
    """What a file of this mode is when it is no regular file, directory or FIFO."""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISFIFO(mode):
        return None
    return "a special file"


def open_bounded(path: str | os.PathLike, open_file=open) -> BinaryIO:
    """`path` opened for reading in binary (by `open_file`, for a regular file), or SpecialFileError
    / OSError. A FIFO is returned once it has data or its writer has come and gone; none within
    FIFO_WAIT_S is SpecialFileError."""
    mode = os.stat(path).st_mode  # follows symlinks: a link to /dev/zero is /dev/zero
    kind = special_kind(mode)
    if kind:
        raise SpecialFileError(f"is {kind}, not a file memlog reads")
    if not stat.S_ISFIFO(mode) or not hasattr(select, "poll"):
        return open_file(path, "rb")
    # O_NONBLOCK: the open itself returns at once even with no writer; poll() then tells data or
    # a writer's hang-up from nobody at all (Linux reports no event until a writer has been there).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        if not poller.poll(int(FIFO_WAIT_S * 1000)):
            raise SpecialFileError(f"a FIFO nobody wrote to within {FIFO_WAIT_S:g} s")
        os.set_blocking(fd, True)  # a writer is there: read as from any pipe
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
