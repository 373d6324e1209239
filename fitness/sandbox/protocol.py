"""Length-prefixed msgpack frames over a pair of pipes (driver <-> worker).

The candidate's stdout and stderr are not this channel: nothing it prints can pose as a reply. A
frame that is not a msgpack map, or announces more than `MAX_FRAME` bytes, is a `ProtocolError`: the
driver treats it as a worker that broke the protocol (a ``crash``), never as an answer.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Any

import msgpack

_HEADER = struct.Struct("<Q")
MAX_FRAME = 1 << 34  # 16 GiB: more than any bench-size buffers the worker may hold


class ProtocolError(ValueError):
    """A malformed frame: not msgpack, not a map, or an impossible length."""


class ChannelClosed(EOFError):
    """The other side closed its pipe (the worker exited or was killed)."""


class ChannelTimeout(TimeoutError):
    """No complete frame arrived before the deadline."""


def send(fd: int, message: dict[str, Any]) -> None:
    """One frame. The message is packed once (bench-size buffers are hundreds of MB: the header is
    written apart rather than joined to a copy of the payload); nothing is written if packing fails."""
    send_frame(fd, msgpack.packb(message, use_bin_type=True))


def send_frame(fd: int, payload: bytes | bytearray) -> None:
    """One frame of an already packed message (`receive_frame`'s payload, passed on unchanged)."""
    _write_all(fd, memoryview(_HEADER.pack(len(payload))))
    _write_all(fd, memoryview(payload))


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        n = os.write(fd, data)
        data = data[n:]


def readable(fd: int, timeout: float) -> bool:
    """Whether `fd` has something to read (a frame's start, or the end of the channel) within `timeout`."""
    ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
    return bool(ready)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytearray:
    """`n` bytes read into one buffer (not chunks joined into a second copy: frames of bench-size buffers
    are hundreds of MB, and the worker's address space is capped)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise ChannelTimeout()
        k = os.readv(fd, [view[got : got + (1 << 20)]])
        if not k:
            raise ChannelClosed()
        got += k
    view.release()
    return buf


def receive(fd: int, timeout: float | None = None) -> dict[str, Any]:
    return receive_frame(fd, timeout)[1]


def receive_frame(fd: int, timeout: float | None = None) -> tuple[bytearray, dict[str, Any]]:
    """One frame: its packed payload (to pass on with `send_frame`) and the message it holds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (length,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame announced {length} bytes")
    payload = _read_exact(fd, length, deadline)
    try:
        message = msgpack.unpackb(payload, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ProtocolError(f"a frame is not valid msgpack ({type(e).__name__})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame is a {type(message).__name__}, not a map")
    return payload, message
