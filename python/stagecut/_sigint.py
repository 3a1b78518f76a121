"""SIGINT and file descriptor 1 around the MIP solvers' C code (see :func:`stagecut._mip._optimize`).

CBC installs its own SIGINT handler while it solves and restores the one it found when it ends;
concurrent solves can leave its handler installed for good. :func:`sigint_enter` and
:func:`sigint_exit` bracket every solve: the disposition from before the first of the solves
running is put back when the last one ends. The raw ``struct sigaction`` is read and written
through ctypes (``sigaction`` is callable from any thread, unlike :func:`signal.signal`).
:class:`Fd1Silenced` points descriptor 1 at the null device, counted under a lock (only CBC's LP
path needs it: it prints Clp's log whatever the log level).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["INTERRUPTS", "Fd1Silenced", "sigaction", "handler_address", "sigint_enter", "sigint_exit", "SIGINT_LOCK",
           "SIGINT_STATE"]

#: How many solves have stopped on Ctrl-C (a solve waiting on another thread raises too).
INTERRUPTS = [0]
SIGINT_LOCK = threading.Lock()
#: (number of solves running, the SIGINT disposition from before the first of them started)
SIGINT_STATE: list[Any] = [0, None]
_LIBC: list[Any] = []


def _libc() -> Any:
    """The C library through ctypes (``None`` where ``sigaction`` is not available)."""
    if not _LIBC:
        try:
            import ctypes

            lib = ctypes.CDLL(None, use_errno=True)
            lib.sigaction  # noqa: B018 - raises AttributeError where there is none
            _LIBC.append(lib)
        except (OSError, AttributeError, TypeError):  # pragma: no cover - not a POSIX system
            _LIBC.append(None)
    return _LIBC[0]


def sigaction(new: bytes | None = None) -> bytes | None:
    """The raw ``struct sigaction`` of SIGINT (set to ``new`` first when given); ``None`` when
    it cannot be read."""
    import ctypes
    import signal

    lib = _libc()
    if lib is None:
        return None
    old = ctypes.create_string_buffer(512)  # larger than struct sigaction on every libc
    act = None if new is None else ctypes.create_string_buffer(new, 512)
    if lib.sigaction(int(signal.SIGINT), act, old) != 0:
        return None
    return old.raw


def handler_address(raw: bytes | None) -> int | None:
    """The handler's address in a raw ``struct sigaction`` (its first member on Linux and macOS)."""
    import ctypes

    if raw is None:
        return None
    size = ctypes.sizeof(ctypes.c_void_p)
    return int.from_bytes(raw[:size], "little" if sys.byteorder == "little" else "big")


def sigint_enter() -> None:
    """A solve starts: remember SIGINT's disposition if it is the first one running."""
    with SIGINT_LOCK:
        if SIGINT_STATE[0] == 0:
            SIGINT_STATE[1] = sigaction()
        SIGINT_STATE[0] += 1


def sigint_exit() -> None:
    """A solve ended: when it was the last one running, SIGINT's disposition is put back (CBC
    saves and restores its handler per solve, which concurrent solves can leave installed)."""
    with SIGINT_LOCK:
        SIGINT_STATE[0] -= 1
        if SIGINT_STATE[0] == 0 and SIGINT_STATE[1] is not None:
            saved = SIGINT_STATE[1]
            SIGINT_STATE[1] = None
            if handler_address(sigaction()) != handler_address(saved):
                sigaction(saved)


class Fd1Silenced:
    """Point file descriptor 1 at the null device while any block of this kind runs (process-wide,
    so counted under a lock: the first block in redirects, the last one out restores)."""

    _lock = threading.Lock()
    _state: list[Any] = [0, None]  # blocks inside, the saved descriptor

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> Fd1Silenced:
        if not self.active:
            return self
        import os
        import sys

        with self._lock:
            if self._state[0] == 0:
                try:
                    sys.stdout.flush()
                    saved = os.dup(1)
                    null = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(null, 1)
                    os.close(null)
                    self._state[1] = saved
                except (OSError, ValueError):
                    self.active = False
                    return self
            self._state[0] += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        import os

        with self._lock:
            self._state[0] -= 1
            if self._state[0] == 0 and self._state[1] is not None:
                os.dup2(self._state[1], 1)
                os.close(self._state[1])
                self._state[1] = None
