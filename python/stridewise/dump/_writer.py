"""Crash-tolerant writers for a stridewise dump: safetensors shards and a JSON-lines index.

A shard is a valid safetensors file at every moment between two appends: its header is written
into a reserved, space-padded region at the start of the file and grows in place, and tensor data
is appended behind it.  Each append writes the data first, then the header entry, then the index
record (one ``write`` of one line), so anything listed in ``index.jsonl`` is on disk in a shard.
Memory stays bounded: a tensor is written as soon as it is captured; nothing is buffered.
"""
from __future__ import annotations

import json
import os
import struct

# Linux writes at most 0x7ffff000 bytes per call; write in 1 GiB pieces.
_WRITE_CHUNK = 1 << 30


def pwrite_all(fd: int, data, offset: int, chunk: int = _WRITE_CHUNK) -> None:
    """Writes all of ``data`` (a bytes-like object) at ``offset``, in pieces of at most ``chunk``."""
    mv = memoryview(data).cast("B")
    done = 0
    total = mv.nbytes
    while done < total:
        n = os.pwrite(fd, mv[done:done + chunk], offset + done)
        if n <= 0:
            raise OSError(f"pwrite returned {n} at offset {offset + done}")
        done += n


class ShardWriter:
    """Appends tensors to ``shard_NNNNN.safetensors`` files in ``directory``.

    shard_bytes: a shard is closed when its data would exceed this (a larger tensor gets a shard
    of its own).  header_reserve: bytes reserved for the JSON header (a shard is also closed when
    its header is full).  fsync: "record" (after every tensor), "shard" (when a shard is closed)
    or "never".
    """

    METADATA = {"format": "pt", "writer": "stridewise.dump", "version": "1"}

    def __init__(self, directory: str, shard_bytes: int = 1 << 30, header_reserve: int = 256 << 10,
                 fsync: str = "shard", _first_data_offset: int = 0):
        if fsync not in ("record", "shard", "never"):
            raise ValueError(f"fsync must be 'record', 'shard' or 'never', got {fsync!r}")
        if header_reserve % 8:
            raise ValueError("header_reserve must be a multiple of 8")
        self.directory = directory
        self.shard_bytes = int(shard_bytes)
        self.header_reserve = int(header_reserve)
        self.fsync = fsync
        self._fd = None
        self._index = -1
        self._name = None
        self._header = ""
        self._data_end = 0
        self._first_data_offset = int(_first_data_offset)  # tests: start past 4 GiB in a sparse file
        self.bytes_written = 0

    @property
    def data_start(self) -> int:
        return 8 + self.header_reserve

    def _open_next(self) -> None:
        self._close_current()
        self._index += 1
        self._name = f"shard_{self._index:05d}.safetensors"
        path = os.path.join(self.directory, self._name)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._header = json.dumps({"__metadata__": self.METADATA}, separators=(",", ":"))
        head = struct.pack("<Q", self.header_reserve) + self._header.encode().ljust(self.header_reserve, b" ")
        pwrite_all(self._fd, head, 0)
        self._data_end = 0
        if self._first_data_offset:
            # Test hook: a filler tensor covering [0, first_data_offset) keeps the file valid
            # (no holes) while the next tensor starts past it; the filler is a sparse region.
            self._add_header_entry("__filler__", "U8", [self._first_data_offset], 0, self._first_data_offset)
            os.ftruncate(self._fd, self.data_start + self._first_data_offset)
            self._data_end = self._first_data_offset
            self._first_data_offset = 0

    def _entry(self, key: str, code: str, shape, begin: int, end: int) -> str:
        body = json.dumps({"dtype": code, "shape": [int(s) for s in shape], "data_offsets": [begin, end]},
                          separators=(",", ":"))
        return json.dumps(key) + ":" + body

    def _add_header_entry(self, key, code, shape, begin, end) -> None:
        tail = "," + self._entry(key, code, shape, begin, end) + "}"
        pos = len(self._header.encode()) - 1  # overwrite the closing brace
        pwrite_all(self._fd, tail.encode(), 8 + pos)
        self._header = self._header[:-1] + tail

    def append(self, key: str, code: str, shape, data) -> tuple:
        """Writes one tensor; returns (file name, absolute byte offset, nbytes)."""
        nbytes = memoryview(data).nbytes
        entry_len = len(self._entry(key, code, shape, 0, 0).encode()) + 64  # room for long offsets
        if entry_len + 128 > self.header_reserve:
            raise ValueError(f"tensor key {key!r} with shape {list(shape)} does not fit a "
                             f"{self.header_reserve}-byte shard header")
        if (self._fd is None
                or (self._data_end > 0 and self._data_end + nbytes > self.shard_bytes)
                or len(self._header.encode()) + entry_len > self.header_reserve):
            self._open_next()
        begin = self._data_end
        offset = self.data_start + begin
        pwrite_all(self._fd, data, offset)  # 1. data
        self._add_header_entry(key, code, shape, begin, begin + nbytes)  # 2. header entry
        if self.fsync == "record":
            os.fsync(self._fd)
        self._data_end += nbytes
        self.bytes_written += nbytes
        return self._name, offset, nbytes

    def _close_current(self) -> None:
        _sync_close(self)

    def close(self) -> None:
        self._close_current()


class IndexWriter:
    """Appends JSON records, one line per ``write`` call, to ``index.jsonl``."""

    def __init__(self, path: str, fsync: str = "shard"):
        self.path = path
        self.fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)

    def write(self, record: dict) -> None:
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False, default=str) + "\n").encode()
        pwrite_or_write(self._fd, line)
        if self.fsync == "record":
            os.fsync(self._fd)

    def close(self) -> None:
        _sync_close(self)


def _sync_close(w) -> None:
    """Closes a writer's open file (w._fd, None when closed), fsyncing it first unless
    w.fsync is "never"; the descriptor is closed even when fsync fails."""
    if w._fd is None:
        return
    try:
        if w.fsync != "never":
            os.fsync(w._fd)
    finally:
        os.close(w._fd)
        w._fd = None


def pwrite_or_write(fd: int, data: bytes) -> None:
    """Appends data (O_APPEND) in as few write calls as the kernel allows."""
    mv = memoryview(data)
    while mv:
        n = os.write(fd, mv)
        mv = mv[n:]
