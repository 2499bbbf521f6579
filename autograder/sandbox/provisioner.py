"""A jupyter_client kernel provisioner that starts the kernel inside the grading sandbox.

:class:`SandboxProvisioner` is registered under the entry point
``attention-lab-sandbox`` (group ``jupyter_client.kernel_provisioners``,
``pyproject.toml``) and chosen, as jupyter_client chooses provisioners, by a
kernelspec whose ``metadata.kernel_provisioner.provisioner_name`` names it.
The grader's kernel manager (:mod:`autograder.sandbox.manager`) always uses
such a kernelspec, whatever the notebook names; the kernelspec's
``metadata.kernel_provisioner.config`` carries the sandbox's settings
(:class:`~autograder.sandbox.command.SandboxSettings`).

For each kernel it makes a private runtime directory: the kernel's ipc
sockets and connection file (the grader talks to the kernel over ZMQ ipc
sockets; the sandbox's network namespace has no route to the grader), the
kernel's log (its stdout and stderr), the staging and mask directories and the
copy of the student package. It launches the kernel with the command of
:func:`~autograder.sandbox.command.sandbox_command`, remembers how the
process ended, can kill its whole process group from any thread (the
wall-clock limit), and removes the directory when the kernel is cleaned up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from autograder.sandbox.command import SandboxSettings, sandbox_command

#: The provisioner's entry-point name (``pyproject.toml``).
PROVISIONER_NAME = "attention-lab-sandbox"


class SandboxProvisioner(SandboxSettings, LocalProvisioner):
    """Launch a kernel in bubblewrap, under limits, as an unprivileged uid; see the module docstring.

    The kernelspec's ``argv[0]`` is the kernel's Python (its environment must
    have ipykernel). Its settings come from the kernelspec's
    ``metadata.kernel_provisioner.config`` (written by
    :class:`~autograder.sandbox.manager.SandboxedKernelManager` from
    ``c.SandboxedKernelManager.<name>``).
    """

    runtime_dir: Path | None = None
    returncode: int | None = None  # how the sandbox ended, once it did (see exit_status)
    last_log: str = ""  # the end of the kernel's log, kept when the runtime directory is removed

    @property
    def ipc_dir(self) -> Path:
        """Where the kernel's sockets and connection file are (bound at the same path inside)."""
        return self.runtime_dir / "ipc"

    @property
    def log_path(self) -> Path:
        return self.runtime_dir / "kernel.log"

    # ---- start ----------------------------------------------------------------------------------

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Make the runtime directory and point the kernel manager's connection (ipc) into it."""
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="al-kernel-", dir=self.runtime_root))
        try:
            os.chmod(self.runtime_dir, 0o711)  # the kernel's uid resolves the paths below, without listing
            self.ipc_dir.mkdir()
            # the kernel (another uid when the grader is root) binds its sockets here until sealed
            os.chmod(self.ipc_dir, 0o777)
            manager = self.parent
            manager.transport = "ipc"
            manager.connection_file = str(self.ipc_dir / "kernel.json")
            manager.ip = str(self.ipc_dir / "kernel")
            kwargs = await super().pre_launch(**kwargs)  # writes the connection file
            os.chmod(manager.connection_file, 0o644)  # readable by the kernel's uid; the runtime dir is private
        except BaseException:
            self.remove_runtime_dir()
            raise
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any):
        """Launch ``cmd`` (the kernel's command) in the sandbox; ``kwargs["cwd"]`` (the notebook's folder) stays outside."""
        try:
            command, fds = sandbox_command(self, cmd, self.runtime_dir, self.ipc_dir, kwargs.get("cwd"))
            log = open(self.log_path, "wb")  # the kernel's own writes to it are capped by RLIMIT_FSIZE
        except BaseException:
            self.remove_runtime_dir()
            raise
        kwargs.update(env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd=str(self.runtime_dir),
                      pass_fds=tuple(fds), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            return await super().launch_kernel(command, **kwargs)
        except BaseException:
            self.remove_runtime_dir()
            raise
        finally:
            log.close()
            for fd in fds:
                os.close(fd)

    def seal(self) -> None:
        """Once the kernel's sockets exist: stop it from creating files in the runtime directory.

        Only effective when the kernel runs as another uid (grader is root).
        """
        if self.runtime_dir is not None and self.ipc_dir.is_dir():
            os.chmod(self.ipc_dir, 0o755)

    def resolve_path(self, path_str: str) -> str | None:
        """None: paths the kernel names are paths inside the sandbox, not on the host."""
        return None

    # ---- while it runs, and after ---------------------------------------------------------------

    def exit_status(self) -> int | None:
        """How the sandbox ended.

        Returns
        -------
        int or None
            None while it runs; else bwrap's exit code (the kernel's, or 128 +
            the signal that killed it), or minus the signal that killed bwrap itself.
        """
        if self.process is not None:
            self.returncode = self.process.poll()
        return self.returncode

    async def wait(self) -> int | None:
        if self.process is not None:  # LocalProvisioner forgets the process once it has ended
            self.returncode = await super().wait()
        return self.returncode

    def kill_now(self) -> None:
        """SIGKILL the sandbox's whole process group now; safe to call from any thread (the wall clock)."""
        if self.pgid:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def log_tail(self, limit: int = 2000) -> str:
        """The end of what bwrap and the kernel wrote to their stdout/stderr, to diagnose a failed start.

        Parameters
        ----------
        limit : int
            Bytes to read from the end.

        Returns
        -------
        str
            The text ("" if there is none; after cleanup, what was kept of it).
        """
        if self.runtime_dir is None:
            return self.last_log
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.path.getsize(self.log_path) - limit))
                return log.read().decode("utf-8", "replace")
        except OSError:
            return self.last_log

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        self.remove_runtime_dir()

    def remove_runtime_dir(self) -> None:
        """Remove the runtime directory, keeping the end of the kernel's log (:attr:`last_log`)."""
        if self.runtime_dir is not None:
            self.last_log = self.log_tail()
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            self.runtime_dir = None
