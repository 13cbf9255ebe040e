"""Logs behind a URL (`s3://`, `gs://`, `az://`, `file://`, `memory://` ...), read through fsspec.

fsspec is optional: install it (plus the file system's own package, e.g. `s3fs` for `s3://`,
`gcsfs` for `gs://`) to read object stores. Credentials are fsspec's business (its usual
environment variables and config files); memlog never asks for them. Without fsspec a URL is one
line saying what to install, exit 2.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from memlog.base.errors import InputError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(spec: str) -> bool:
    """`scheme://...`: read through fsspec, not the local file system."""
    return bool(_URL.match(spec))


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec file system behind `url` and the path within it."""
    try:
        import fsspec
    except ImportError:
        raise InputError(f"{url}: reading URLs needs fsspec (pip install fsspec, and s3fs for s3://, gcsfs for gs://)") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec names the package the scheme needs ("Install s3fs to access S3")
        raise InputError(f"{url}: {exc}") from None
    except (ValueError, OSError) as exc:
        raise InputError(f"{url}: {exc}") from None


def url_of(fs: Any, path: str) -> str:
    """The URL of a path listed by `fs` (listings drop the scheme)."""
    return fs.unstrip_protocol(path)


def open_url(url: str) -> BinaryIO:
    fs, path = filesystem(url)
    try:
        if fs.isdir(path):
            raise InputError(f"{url}: is a directory, not a log file")
        return fs.open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except PermissionError:
        raise InputError(f"{url}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{url}: cannot open ({exc.strerror or exc})") from None
