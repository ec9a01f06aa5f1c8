"""Reading files and uploads as text, safely: every format reads through here.

A read never takes more than `limit + 1` bytes, whatever the file is (a regular file, /dev/zero,
a FIFO, a process substitution): the size a file reports is not trusted. Bytes must be UTF-8
(a BOM is dropped) and not blank.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..model import ScenarioError

MAX_UPLOAD_MB = 20
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024
# A scheduler history uploaded to the app: exports are large (a month of sacct on a few hundred
# GPUs is tens of MB; 90,000 jobs are 23 MB), and parsing one takes about 5x its size in memory,
# so 200 MB keeps a session near a GB. `gpuplan import` reads up to 2 GB.
MAX_HISTORY_UPLOAD_MB = 200
MAX_HISTORY_UPLOAD_BYTES = MAX_HISTORY_UPLOAD_MB * 1024 * 1024

# `json`'s messages that end in " at" (it gives the place apart), as whole sentences
_JSON_WORDS = {
    "Unterminated string starting at": "a string starts here and is never closed (a file cut "
    "short?)",
    "Invalid control character at": "a raw control character (a newline or tab) inside a string",
}


def json_error(name: str, e: json.JSONDecodeError) -> ScenarioError:
    """A JSON syntax error as one line naming the file, the line and column, and what broke."""
    words = _JSON_WORDS.get(e.msg, e.msg)
    return ScenarioError(f"{name}: not valid JSON at line {e.lineno}, column {e.colno}: {words}")


def decode_upload(data: bytes | BinaryIO, name: str, limit: int = MAX_UPLOAD_BYTES) -> str:
    """Uploaded bytes (or a binary file object, read at most limit + 1 bytes) as text."""
    if not isinstance(data, bytes | bytearray):
        data = data.read(limit + 1)
    if len(data) > limit:  # (read no further than one byte past it: its size is unknown)
        raise ScenarioError(f"{name}: file is larger than the upload limit of {limit / 2**20:g} MB")
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{name}: is not UTF-8 text (byte {e.start} cannot be read)") from None
    if not text.strip():
        raise ScenarioError(f"{name}: file is empty")
    return text


@contextlib.contextmanager
def os_errors(path: Path) -> Iterator[None]:
    """OS errors while reading `path` as one ScenarioError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a folder, not a file") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot be read ({e.strerror or e})") from None


def read_bytes(path: str | Path, limit: int = MAX_UPLOAD_BYTES) -> bytes:
    """At most limit + 1 bytes of a file (more means too large); OS errors as ScenarioError."""
    path = Path(path)
    with os_errors(path):
        if path.is_dir():
            raise IsADirectoryError
        with path.open("rb") as f:
            return f.read(limit + 1)


def read_text(path: str | Path, limit: int = MAX_UPLOAD_BYTES) -> str:
    """A file's text, with the same checks as an upload; never reads more than limit + 1 bytes."""
    return decode_upload(read_bytes(path, limit), Path(path).name, limit)
