"""Every limit of the grading sandbox, with its default: the one place to read them and to change them.

Instructors change them in ``nbgrader_config.py``:

* ``c.SandboxedKernelManager.<name>`` for :class:`KernelLimits` (what one
  kernel may use; the provisioner applies them with ``prlimit`` and tmpfs
  sizes) and :class:`MessageLimits` (what the grader accepts from a kernel);
* ``c.SandboxedExecute.<name>`` for :class:`RunLimits` (how long a notebook
  may run, how much of its output is kept).

The classes are trait mixins: the configurable classes that use them
(:class:`~autograder.sandbox.manager.SandboxedKernelManager`,
:class:`~autograder.sandbox.provisioner.SandboxProvisioner`,
:class:`~autograder.sandbox.client.CappedKernelClient`,
:class:`~autograder.sandbox.execute.SandboxedExecute`) inherit them, so each
default is written once.
"""

from __future__ import annotations

from traitlets import HasTraits, Integer

MiB = 2**20

#: Characters of an error's message, of its traceback, and of a cell's value (text/plain) kept when
#: over the output caps: an error or a value can decide a grade, so they are trimmed, never dropped.
MAX_ERROR_TEXT = 2000
MAX_TRACEBACK = 20000
MAX_VALUE_TEXT = 2000


class KernelLimits(HasTraits):
    """What one sandboxed kernel may use (``prlimit`` inside the sandbox; tmpfs sizes)."""

    memory_limit = Integer(2 * 2**30, help="Address-space limit of each kernel process, bytes (RLIMIT_AS).").tag(
        config=True)
    cpu_time_limit = Integer(300, help="CPU-time limit of the kernel, seconds (RLIMIT_CPU).").tag(config=True)
    file_size_limit = Integer(64 * MiB, help="Largest file the kernel may write, bytes (RLIMIT_FSIZE).").tag(
        config=True)
    process_limit = Integer(64, help="Processes and threads of the kernel's uid (RLIMIT_NPROC; needs the grader "
                                     "to run as root, so that the kernel's uid is its own).").tag(config=True)
    open_files_limit = Integer(1024, help="Open file descriptors per process (RLIMIT_NOFILE).").tag(config=True)
    scratch_size = Integer(256 * MiB, help="Size of each private tmpfs (working dir, /tmp, /dev/shm), bytes.").tag(
        config=True)


class MessageLimits(HasTraits):
    """What the grader accepts from a kernel at once (ZMQ socket options of the grader's connection)."""

    max_message_bytes = Integer(16 * MiB, help="Largest single message accepted from the kernel, bytes "
                                               "(a larger one is lost; ZMQ_MAXMSGSIZE).").tag(config=True)
    queued_messages = Integer(16, help="Messages received ahead of the grader (ZMQ_RCVHWM): a flood waits in the "
                                       "kernel, or is dropped there, not in the grader's memory.").tag(config=True)


class RunLimits(HasTraits):
    """How long one notebook may run, and how much of its output the grader keeps."""

    wall_clock_limit = Integer(
        60, help="Seconds a whole notebook may run (after its kernel started, the grader's passes after the last "
                 "cell included) before the sandbox is killed.").tag(config=True)
    max_cell_output_bytes = Integer(2 * MiB, help="Output kept per cell, bytes.").tag(config=True)
    max_notebook_output_bytes = Integer(16 * MiB, help="Output kept per notebook, bytes.").tag(config=True)
    max_grading_output_bytes = Integer(
        64 * MiB, help="Output that grading reads (grading_mime_types) kept per notebook, bytes.").tag(config=True)
