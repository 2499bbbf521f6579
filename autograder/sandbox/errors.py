"""The one error of the grading sandbox: the machine cannot run it, so nothing was graded."""

from __future__ import annotations

INSTALL_HINT = ("install bubblewrap, e.g. `sudo apt-get install bubblewrap` on Debian/Ubuntu "
                "(`make grade` and `.ci/run` do this when run as root)")


class SandboxError(RuntimeError):
    """The grading machine cannot run the sandbox (no bwrap, no user namespaces): nothing was graded."""
