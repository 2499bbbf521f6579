"""The grading sandbox: learners' notebooks run in a bubblewrap-locked kernel under limits.

The names other modules use are re-exported here, so that they import from
``autograder.sandbox`` whatever module inside holds them.
"""

from autograder.sandbox.execute import AFTER_LAST_CELL, SandboxedExecute
from autograder.sandbox.provisioner import SandboxedKernelManager, SandboxError, check_sandbox

__all__ = ["AFTER_LAST_CELL", "SandboxError", "SandboxedExecute", "SandboxedKernelManager", "check_sandbox"]
