"""The fallback of ``python -m autograder check`` (a learner checking their own work) where bubblewrap cannot run.

A self-study learner's machine may have no bubblewrap, or no user namespaces (some containers, WSL set-ups,
macOS). Grading a class there must stop (the instructor's ``grade`` refuses: a submission is someone else's
code), but a learner checking *their own* notebook runs nothing they would not run by pressing *Run All*.
So ``check`` — and only ``check`` — grades there with the same pipeline, with :class:`UnsandboxedExecute`
in place of :class:`~autograder.sandbox.execute.SandboxedExecute`: the kernel is the grader's Python,
started as the learner, outside any namespace, still under the sandbox's ``prlimit`` limits (memory, CPU
time, file size, open files) and the wall clock, in a private working directory. What it does not have is
the isolation: the learner's code sees their files and the network.

:func:`allowed_unsandboxed` tells whether a grading configuration runs kernels this way; the class
grader (:func:`autograder.nbgrader.grading.grade_class`) refuses such a configuration unless its caller is
``check`` (:mod:`autograder.nbgrader.self_check`).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from autograder.course import KERNEL_ENVIRONMENT
from autograder.sandbox.execute import SandboxedExecute
from autograder.sandbox.manager import SandboxedKernelManager
from autograder.sandbox.provisioner import SandboxProvisioner

#: The provisioner's entry-point name (``pyproject.toml``), which :class:`UnsandboxedKernelManager` names.
PROVISIONER_NAME = "attention-lab-unsandboxed"
PRLIMIT = "/usr/bin/prlimit"


class UnsandboxedProvisioner(SandboxProvisioner):
    """Start the kernel as the learner, without bubblewrap, under the sandbox's ``prlimit`` limits.

    Everything else is :class:`~autograder.sandbox.provisioner.SandboxProvisioner`'s: the private runtime
    directory with the ipc sockets and the kernel's log, the exit status, the wall-clock kill of the
    kernel's process group, the clean-up.
    """

    async def launch_kernel(self, cmd: list[str], **kwargs: Any):
        """Launch ``cmd`` directly, in ``<runtime dir>/work``, with the limits the sandbox would set.

        The process-count limit is left out: outside the sandbox it would count every process of the
        learner (their browser's too), not the kernel's.
        """
        work = self.runtime_dir / "work"
        work.mkdir()
        limits = []
        if os.access(PRLIMIT, os.X_OK):
            limits = [PRLIMIT, f"--as={self.memory_limit}", "--core=0", f"--fsize={self.file_size_limit}",
                      f"--cpu={self.cpu_time_limit}:{self.cpu_time_limit + 5}", f"--nofile={self.open_files_limit}",
                      "--"]
        env = {**os.environ, **KERNEL_ENVIRONMENT, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("JPY_PARENT_PID", None)
        log = open(self.log_path, "wb")
        kwargs.update(env=env, cwd=str(work), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            # LocalProvisioner (jupyter_client's launcher) starts it in a new session: its own process group
            return await super(SandboxProvisioner, self).launch_kernel(limits + cmd, **kwargs)
        except BaseException:
            self.remove_runtime_dir()
            raise
        finally:
            log.close()


class UnsandboxedKernelManager(SandboxedKernelManager):
    """:class:`~autograder.sandbox.manager.SandboxedKernelManager` whose kernelspec names :class:`UnsandboxedProvisioner`."""

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        spec.display_name = "Python 3 (not sandboxed: make check)"
        spec.metadata["kernel_provisioner"]["provisioner_name"] = PROVISIONER_NAME
        return spec


class UnsandboxedExecute(SandboxedExecute):
    """:class:`~autograder.sandbox.execute.SandboxedExecute` with the kernel of :class:`UnsandboxedKernelManager`.

    Only ``python -m autograder check`` puts it in a grading pipeline (see the module docstring).
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", UnsandboxedKernelManager)
        super().__init__(**kwargs)


def allowed_unsandboxed(preprocessors) -> bool:
    """Whether a grading pipeline (``c.Autograde.autograde_preprocessors``) runs learners' code outside the sandbox."""
    return any(isinstance(p, type) and issubclass(p, UnsandboxedExecute) for p in preprocessors or ())


#: Appended to the scratch course's ``nbgrader_config.py`` by ``check`` when bubblewrap cannot run.
CONFIG_BLOCK = f'''
# Written by `python -m autograder check`: bubblewrap cannot run on this machine, so the learner's own
# notebook runs outside the sandbox (autograder/sandbox/unsandboxed.py). Never in a class's configuration.
from autograder.sandbox.unsandboxed import UnsandboxedExecute as _UnsandboxedExecute
c.Autograde.autograde_preprocessors = [_UnsandboxedExecute if p is SandboxedExecute else p
                                       for p in c.Autograde.autograde_preprocessors]
'''

