"""The wall-clock limit of one notebook: after so many seconds, its whole sandbox is killed.

The per-cell timeout (``Execute.timeout``) only interrupts, and a loop that
catches ``KeyboardInterrupt`` ignores interrupts; a timer thread that kills
the kernel's process group does not depend on the kernel's cooperation.
nbclient then sees a dead kernel, which the executor records with this clock's
reason (:attr:`WallClock.fired`).
"""

from __future__ import annotations

import threading
from typing import Callable


class WallClock:
    """Call ``kill`` once ``seconds`` have passed since :meth:`start`, unless :meth:`stop` came first.

    Parameters
    ----------
    seconds : float
        The limit.
    kill : callable
        Kills the sandbox; called from the timer's thread, so it must be thread-safe
        (:meth:`~autograder.sandbox.provisioner.SandboxProvisioner.kill_now` is).
    """

    def __init__(self, seconds: float, kill: Callable[[], None]):
        self.seconds = seconds
        self.kill = kill
        self.fired = threading.Event()
        self.timer: threading.Timer | None = None

    def start(self) -> None:
        self.timer = threading.Timer(self.seconds, self.expire)
        self.timer.daemon = True
        self.timer.start()

    def expire(self) -> None:
        self.fired.set()
        self.kill()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
