"""The grading sandbox: learners' notebooks run in a bubblewrap-locked kernel under limits.

One module per job:

* :mod:`~autograder.sandbox.execute` — ``SandboxedExecute``, nbgrader's ``Execute`` step with the
  wall clock, dead kernels, output caps and code after the last cell;
* :mod:`~autograder.sandbox.manager` — ``SandboxedKernelManager``: always the grader's Python kernel,
  through the sandbox provisioner, whatever the notebook names;
* :mod:`~autograder.sandbox.provisioner` — ``SandboxProvisioner``, the jupyter_client kernel
  provisioner (entry point ``attention-lab-sandbox``) that launches, kills and cleans up the sandbox;
* :mod:`~autograder.sandbox.command` — the bwrap/prlimit command line; :mod:`~autograder.sandbox.mounts` —
  what the kernel sees; :mod:`~autograder.sandbox.image` — the Python image at neutral paths;
* :mod:`~autograder.sandbox.client` — the message-size cap; :mod:`~autograder.sandbox.caps` — the output caps;
* :mod:`~autograder.sandbox.limits` — every limit and its default; :mod:`~autograder.sandbox.clock` — the
  wall clock; :mod:`~autograder.sandbox.reasons` — how a kernel stopped, in one line.

The names other modules use are re-exported here, so that they import from
``autograder.sandbox`` whatever module inside holds them.
"""

from autograder.sandbox.command import check_sandbox
from autograder.sandbox.errors import SandboxError
from autograder.sandbox.execute import AFTER_LAST_CELL, NO_CELL_TIMEOUT, SandboxedExecute
from autograder.sandbox.manager import SandboxedKernelManager
from autograder.sandbox.provisioner import PROVISIONER_NAME, SandboxProvisioner

__all__ = ["AFTER_LAST_CELL", "NO_CELL_TIMEOUT", "PROVISIONER_NAME", "SandboxError", "SandboxProvisioner", "SandboxedExecute",
           "SandboxedKernelManager", "check_sandbox"]
