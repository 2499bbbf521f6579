"""The command line that starts a kernel inside bubblewrap, under limits, as an unprivileged uid.

:func:`sandbox_command` turns a kernel's own command into
``[unshare ... setpriv ...] bwrap ... -- prlimit ... -- <kernel command>``:

* every namespace is new (network, IPC, PID, UTS, cgroup, user), further user
  namespaces are disabled, no capabilities are left, and the kernel runs as an
  unprivileged uid inside (65534) — and, when the grader runs as root, outside
  too (``setpriv`` before ``bwrap``), so that the process-count limit applies
  and a sandbox escape would not be root;
* only what :mod:`autograder.sandbox.mounts` lists is bound, read-only; a
  private working directory, ``/tmp`` and ``/dev/shm`` are small tmpfs, with a
  minimal ``/dev`` and a new ``/proc``;
* ``prlimit`` sets :class:`~autograder.sandbox.limits.KernelLimits`;
* the kernel's environment is built from nothing (:func:`kernel_env`).

:func:`check_sandbox` tells whether bubblewrap can work on this machine at all.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from traitlets import Integer, Unicode, default

from autograder.course import KERNEL_ENVIRONMENT
from autograder.sandbox.errors import INSTALL_HINT, SandboxError
from autograder.sandbox.image import INSIDE_PACKAGES, Image
from autograder.sandbox.limits import KernelLimits
from autograder.sandbox.mounts import (KernelView, bound_roots, hidden_copies, kernel_image, matplotlib_font_cache,
                                       package_copies, package_dir, reachable, within)

#: Top-level names that merged-/usr systems make symlinks (replicated) and older ones directories (bound).
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The only files of /etc the kernel sees: the dynamic loader's configuration, the time zone, fonts.
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/mime.types", "/etc/fonts")  # fonts: fontconfig complains on stderr

WORKDIR = "/home/learner"  # the kernel's private working directory, inside the sandbox
#: Run by root in a private mount namespace: stage the pairs "source stage" given as arguments, then
#: drop to the kernel's uid and exec the rest (bwrap ...).
STAGE_AND_DROP = ('set -e; while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; '
                  'exec /usr/bin/setpriv --reuid={uid} --regid={uid} --clear-groups -- "$@"')
MASK_SOURCE = ('raise ImportError("{name} is not available while a notebook is graded: '
               'the grading sandbox hides it from learners\' code")\n')


class SandboxSettings(KernelLimits, KernelView):
    """Everything that decides how a kernel's sandbox is built (``c.SandboxedKernelManager.<name>``)."""

    bwrap = Unicode("bwrap", help="Name or path of the bubblewrap executable.").tag(config=True)
    kernel_uid = Integer(65534, help="Unprivileged uid/gid of the kernel (nobody).").tag(config=True)
    runtime_root = Unicode(help="Where the private runtime directories (ipc sockets) are created.").tag(config=True)

    @default("runtime_root")
    def temporary_directory(self) -> str:
        return tempfile.gettempdir()

    def sandbox_settings(self) -> dict:
        """These settings' values, by name (what the kernel manager hands its provisioner)."""
        return {name: getattr(self, name) for name in SandboxSettings.class_trait_names()}


@functools.lru_cache(maxsize=None)
def check_sandbox(bwrap: str = "bwrap", uid: int = 65534) -> str:
    """Check once per process that bubblewrap can build the sandbox here; return the path of ``bwrap``.

    Parameters
    ----------
    bwrap : str
        Name or path of the bubblewrap executable.
    uid : int
        The unprivileged uid the kernel runs as (also outside the sandbox when the grader is root).

    Returns
    -------
    str
        Absolute path of ``bwrap``.

    Raises
    ------
    SandboxError
        If ``bwrap`` is missing, or cannot create the namespaces (for example
        inside a container without user namespaces), with bwrap's own message.
    """
    path = shutil.which(bwrap)
    if path is None:
        raise SandboxError(f"learners' notebooks are graded in a bubblewrap sandbox, but {bwrap!r} "
                           f"was not found on PATH: {INSTALL_HINT}")
    helpers = ["/usr/bin/prlimit"] + (["/usr/bin/unshare", "/usr/bin/setpriv"] if os.geteuid() == 0 else [])
    missing = [helper for helper in helpers if not os.access(helper, os.X_OK)]
    if missing:
        raise SandboxError(f"the grading sandbox needs {', '.join(missing)} (Debian package util-linux)")
    probe = [path, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
             "--uid", str(uid), "--gid", str(uid), "--ro-bind", "/usr", "/usr",
             *system_links(), "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, **drop_privileges(uid))
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"bubblewrap could not be run ({error}); {INSTALL_HINT}") from error
    if done.returncode != 0:
        raise SandboxError(
            "bubblewrap cannot build the grading sandbox on this machine (it needs unprivileged user "
            "namespaces; in a container, run it with them allowed): "
            + (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1])
    return path


def drop_privileges(uid: int) -> dict:
    """Popen arguments that start bwrap as ``uid`` when the grader is root (else as the grader)."""
    if os.geteuid() != 0:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def system_links() -> list[str]:
    """bwrap arguments that recreate ``/bin``, ``/lib``, ... as they are here (links, or bound directories)."""
    args = []
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def kernel_env(settings: SandboxSettings, python: str) -> dict[str, str]:
    """The kernel's whole environment (bwrap starts it from an empty one).

    Parameters
    ----------
    settings : SandboxSettings
        The sandbox's settings.
    python : str
        The kernel's interpreter, on the host.

    Returns
    -------
    dict of str to str
        PATH, HOME=/tmp, LANG, the course's ``KERNEL_ENVIRONMENT`` (OPENBLAS_NUM_THREADS=1), MPLBACKEND=Agg,
        MPLCONFIGDIR and IPYTHONDIR under /tmp, PYTHONDONTWRITEBYTECODE=1,
        and nbgrader's NBGRADER_EXECUTION (NBGRADER_VALIDATING) as set in the grader.
    """
    seen = kernel_image(settings, python)
    env = {
        "PATH": f"{seen.bin_dir if seen else Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **KERNEL_ENVIRONMENT,
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if settings.hide_host_paths and any(map(package_dir, settings.student_packages)):
        env["PYTHONPATH"] = str(INSIDE_PACKAGES)
    if seen and seen.library_dir:
        env["LD_LIBRARY_PATH"] = seen.library_dir
    for key in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def sandbox_command(settings: SandboxSettings, kernel_cmd: list[str], runtime_dir: Path, ipc_dir: Path,
                    notebook_dir: str | None = None) -> tuple[list[str], list[int]]:
    """The full command that starts ``kernel_cmd`` in the sandbox.

    When the grader is root, the command first enters a private mount
    namespace (``unshare``) where every bound directory that the kernel's
    uid could not reach itself (``/root/.pyenv``) is bind-mounted on a
    staging directory it can reach, then drops to that uid (``setpriv``)
    and runs bwrap, which resolves its sources with the kernel's rights.

    Parameters
    ----------
    settings : SandboxSettings
        Limits and what the kernel sees.
    kernel_cmd : list of str
        The kernel's own command line; ``kernel_cmd[0]`` is its Python, on the
        host (run at its neutral path inside when ``hide_host_paths`` is on).
    runtime_dir : pathlib.Path
        This kernel's private directory on the host (staging, masks, package copies).
    ipc_dir : pathlib.Path
        The directory of the kernel's ipc sockets and connection file, bound at the same path inside.
    notebook_dir : str, optional
        Where nbgrader runs the notebook, inside the course directory; it
        must stay invisible.

    Returns
    -------
    command : list of str
        ``[unshare ... setpriv ...] bwrap ... -- prlimit ... -- kernel_cmd``.
    fds : list of int
        Open descriptors the command reads (``/etc/passwd``, the font list):
        pass them to the process, then close them.

    Raises
    ------
    SandboxError
        If bwrap cannot work here (:func:`check_sandbox`), the kernel's Python
        does not run, or a bound path is ``/`` or holds ``notebook_dir`` (the
        course directory).
    """
    fds: list[int] = []

    def data(content: str | bytes) -> str:
        # a file bwrap reads the content from; a temporary file, not a pipe: the font list outgrows a pipe
        with tempfile.TemporaryFile(dir=runtime_dir) as handle:
            handle.write(content.encode() if isinstance(content, str) else content)
            handle.seek(0)
            fd = os.dup(handle.fileno())
        fds.append(fd)
        return str(fd)

    python = kernel_cmd[0]
    uid = str(settings.kernel_uid)
    as_root = os.geteuid() == 0
    staged: list[tuple[Path, Path]] = []

    def source(path: Path) -> str:
        if not as_root or reachable(path, settings.kernel_uid):
            return str(path)
        stage = runtime_dir / "stage" / str(len(staged))
        if path.is_dir():
            stage.mkdir(parents=True)
        else:
            stage.parent.mkdir(parents=True, exist_ok=True)
            stage.touch()
        staged.append((path, stage))
        return str(stage)

    args = [check_sandbox(settings.bwrap, settings.kernel_uid),
            "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--uid", uid, "--gid", uid, "--hostname", "grading-sandbox"]
    roots = bound_roots(settings, python)
    exposed = [r for r in roots if r == Path("/") or (notebook_dir and within(Path(notebook_dir).resolve(), [r]))]
    if exposed:
        raise SandboxError(f"the grading sandbox would show the kernel {exposed[0]}, which holds the course "
                           f"directory ({notebook_dir}); bind narrower paths")
    size = str(settings.scratch_size)
    # scratch space first, so that read-only paths under /tmp (if configured) are bound on top of it
    args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", WORKDIR]
    for root in roots:
        args += ["--ro-bind", source(root), str(root)]
    seen: Image | None = kernel_image(settings, python)
    packages = package_copies(settings, runtime_dir / "packages")
    for host, inside in seen.mounts if seen else ():
        args += ["--ro-bind", source(host), str(inside)]
    if packages is not None:
        args += ["--ro-bind", str(packages), str(INSIDE_PACKAGES)]
    args += system_links()
    for name in ETC_FILES:
        if os.path.exists(name):
            args += ["--ro-bind", source(Path(name).resolve()), name]
    args += ["--ro-bind-data", data(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                    f"learner:x:{uid}:{uid}:learner:/tmp:/usr/sbin/nologin\n"), "/etc/passwd",
             "--ro-bind-data", data(f"root:x:0:\nlearner:x:{uid}:\n"), "/etc/group"]
    masks = runtime_dir / "masks"
    for name in settings.hidden_packages:
        for number, copy in enumerate(hidden_copies(name, roots)):
            mask = masks / f"{name}-{number}"
            mask.parent.mkdir(parents=True, exist_ok=True)
            if copy.is_dir():
                mask.mkdir()
                (mask / "__init__.py").write_text(MASK_SOURCE.format(name=name))
            else:
                mask.write_text(MASK_SOURCE.format(name=name))
            args += ["--ro-bind", str(mask), str(copy)]
    env = kernel_env(settings, python)
    fonts = matplotlib_font_cache() if python == sys.executable else None
    if fonts is not None:
        args += ["--file", data(fonts[1]), f"{env['MPLCONFIGDIR']}/{fonts[0]}"]
    args += ["--bind", str(ipc_dir), str(ipc_dir), "--chdir", WORKDIR, "--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]  # a budget on the grading process caps its kernel too
    memory = settings.memory_limit if hard == resource.RLIM_INFINITY else min(settings.memory_limit, hard)
    limits = ["/usr/bin/prlimit", f"--as={memory}", "--core=0", f"--fsize={settings.file_size_limit}",
              f"--nproc={settings.process_limit}",
              # SIGXCPU at the limit (fatal unless handled), SIGKILL a little later
              f"--cpu={settings.cpu_time_limit}:{settings.cpu_time_limit + 5}",
              f"--nofile={settings.open_files_limit}", "--"]
    inside = [seen.python if seen else python, *kernel_cmd[1:]]  # the same interpreter, at its neutral path
    command = args + ["--"] + limits + inside
    if as_root:
        mounts = [str(p) for pair in staged for p in pair]
        command = ["/usr/bin/unshare", "--mount", "--propagation", "private", "--",
                   "/bin/sh", "-c", STAGE_AND_DROP.format(uid=uid), "sh", *mounts, "--", *command]
    return command, fds
