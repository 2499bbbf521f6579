"""The grader's kernel manager: always the grader's own Python kernel, always through the sandbox provisioner.

:class:`SandboxedKernelManager` is the ``kernel_manager_class`` of
:class:`~autograder.sandbox.execute.SandboxedExecute`. Nothing in the notebook
chooses what runs: whatever kernelspec the notebook names ("bash", a kernel
that does not exist), the manager's kernelspec is ``<python> -m
ipykernel_launcher`` of the grader's environment, with
``metadata.kernel_provisioner`` naming the sandbox provisioner
(:mod:`autograder.sandbox.provisioner`) and carrying this manager's sandbox
settings as the provisioner's config — jupyter_client's own way to choose and
configure a provisioner. Its clients are
:class:`~autograder.sandbox.client.CappedKernelClient`.
"""

from __future__ import annotations

import sys

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Unicode, default

from autograder.sandbox.client import CappedKernelClient
from autograder.sandbox.command import SandboxSettings
from autograder.sandbox.errors import SandboxError
from autograder.sandbox.limits import MessageLimits
from autograder.sandbox.provisioner import PROVISIONER_NAME, SandboxProvisioner


class SandboxedKernelManager(SandboxSettings, MessageLimits, AsyncKernelManager):
    """Start the grader's Python kernel through the sandbox provisioner, whatever the notebook names.

    All settings are configurable, e.g.
    ``c.SandboxedKernelManager.memory_limit = 4 * 2**30`` (the limits are in
    :mod:`autograder.sandbox.limits`, what the kernel sees in
    :mod:`autograder.sandbox.mounts`).
    """

    python = Unicode(sys.executable, help="Python of the kernel (its environment must have ipykernel).").tag(
        config=True)

    interrupts = 0  # how many times the kernel was interrupted (a cell over its timeout), for the grading record
    sandbox_spec: KernelSpec | None = None

    @default("client_factory")
    def capped_client(self):
        return CappedKernelClient

    def __init__(self, **kwargs):
        kwargs.pop("kernel_name", None)  # the notebook's kernelspec never chooses what runs
        super().__init__(**kwargs)

    @property
    def kernel_spec(self) -> KernelSpec:
        """The one kernel the grader runs: its own Python's ipykernel, started by the sandbox provisioner."""
        if self.sandbox_spec is None:
            self.sandbox_spec = KernelSpec(
                argv=[self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="Python 3 (grading sandbox)", language="python",
                interrupt_mode="message",  # a signal to bwrap would not reach the kernel's new session
                env={}, resource_dir="",
                metadata={"kernel_provisioner": {"provisioner_name": PROVISIONER_NAME,
                                                 "config": self.sandbox_settings()}})
        return self.sandbox_spec

    @property
    def ipykernel(self) -> bool:
        return True

    @property
    def sandbox(self) -> SandboxProvisioner | None:
        """The provisioner of the kernel started last (None before a start)."""
        provisioner = self.provisioner
        if provisioner is not None and not isinstance(provisioner, SandboxProvisioner):
            raise SandboxError(f"a sandboxed kernel needs the {PROVISIONER_NAME} provisioner, "
                               f"not {type(provisioner).__name__}")
        return provisioner

    def client(self, **kwargs) -> CappedKernelClient:
        kwargs.setdefault("max_message_bytes", self.max_message_bytes)
        kwargs.setdefault("queued_messages", self.queued_messages)
        client = super().client(**kwargs)
        if not isinstance(client, CappedKernelClient):
            raise SandboxError(f"a sandboxed kernel needs the capped client, not {type(client).__name__}")
        return client

    async def interrupt_kernel(self) -> None:
        self.interrupts += 1
        await super().interrupt_kernel()
