"""The on-disk form of a run's records: msgpack maps, appended one by one to a log file.

The evaluation history (`history.msgpack`: one `Individual.to_dict` per evaluation run, with
``"kind": "evaluation"``) is written by whichever component evaluates (a local service or the Ray
broker) and read by the run directory's readers; checkpoints are packed with the same functions.
A record cut short by a kill is dropped (and cut off before anything new is appended), never
allowed to corrupt the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class MsgpackLog:
    """An append-only file of msgpack maps."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _scan(self) -> tuple[list[dict[str, Any]], int]:
        """Complete records and the byte offset where the complete part ends."""
        if not self.path.exists():
            return [], 0
        records: list[dict[str, Any]] = []
        end = 0
        with open(self.path, "rb") as f:
            unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False)
            try:
                for obj in unpacker:
                    records.append(obj)
                    end = unpacker.tell()
            except (ValueError, msgpack.UnpackException):
                pass  # garbage after the last complete record (a write cut short)
        return records, end

    def read(self) -> list[dict[str, Any]]:
        return self._scan()[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read())

    def repair(self) -> int:
        """Cut off an incomplete last record; returns how many complete records there are."""
        records, end = self._scan()
        if self.path.exists() and self.path.stat().st_size != end:
            with open(self.path, "r+b") as f:
                f.truncate(end)
        return len(records)

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "ab") as f:
            f.write(pack(record))
            f.flush()
