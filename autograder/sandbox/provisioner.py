"""A Python kernel locked in a bubblewrap sandbox, for running learners' notebooks while grading.

:class:`SandboxedKernelManager` is a ``jupyter_client`` kernel manager that
always starts the grader's own Python kernel (whatever kernelspec the
notebook names) inside ``bwrap`` (bubblewrap), under resource limits:

* **whitelist of files**: read-only system directories (``/usr``, the
  ``/bin``, ``/lib*`` links, a few files of ``/etc``), the Python
  installation (``sys.base_prefix``, ``sys.prefix``) and the student package
  ``attention_lab`` only; a private working directory, ``/tmp`` and
  ``/dev/shm`` (small tmpfs each), a minimal ``/dev`` and a new ``/proc``.
  Nothing else of the host exists inside: not the course directory
  (``gradebook.db``, ``source/``, ``autograder/``, other students'
  submissions), not the home directories. A copy of ``autograder`` reachable
  from a bound path (a non-editable install in ``site-packages``) is masked
  by a package that refuses to import;
* **no network, no privileges**: every namespace is new (network, IPC, PID,
  UTS, cgroup, user), further user namespaces are disabled, no capabilities
  are left, and the kernel runs as an unprivileged uid inside (65534) — and,
  when the grader runs as root, outside too (``setpriv`` before ``bwrap``),
  so that the process-count limit applies and a sandbox escape would not be
  root;
* **limits** (``prlimit`` inside the sandbox): address space, no core files,
  file size, processes/threads, CPU time, open files;
* the grader talks to the kernel over ZMQ **ipc** sockets in a private
  runtime directory bound into the sandbox (the network namespace has no
  route to the grader), with a cap on the size of any one message.

Nothing in the notebook chooses how its kernel starts. A sandbox that cannot
start (no ``bwrap``, user namespaces disabled) is an error of the grading
machine and is reported as such (:class:`SandboxError`, :func:`check_sandbox`).
The grading side of a run (wall clock, dead kernels, output caps) is
:mod:`autograder.sandbox`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager, KernelManager
from traitlets import Bool, Integer, List, Unicode, default

from autograder.sandbox.client import CappedKernelClient
from autograder.sandbox.image import INSIDE_PACKAGES, Image, python_image

INSTALL_HINT = ("install bubblewrap, e.g. `sudo apt-get install bubblewrap` on Debian/Ubuntu "
                "(`make grade` and `.ci/run` do this when run as root)")

#: Host directories that the kernel may read, if they exist (system libraries and programs).
SYSTEM_DIRS = ("/usr",)
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


class SandboxError(RuntimeError):
    """The grading machine cannot run the sandbox (no bwrap, no user namespaces): nothing was graded."""


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
             *_system_links(), "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, **_drop_privileges(uid))
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"bubblewrap could not be run ({error}); {INSTALL_HINT}") from error
    if done.returncode != 0:
        raise SandboxError(
            "bubblewrap cannot build the grading sandbox on this machine (it needs unprivileged user "
            "namespaces; in a container, run it with them allowed): "
            + (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1])
    return path


def _drop_privileges(uid: int) -> dict:
    """Popen arguments that start bwrap as ``uid`` when the grader is root (else as the grader)."""
    if os.geteuid() != 0:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _system_links() -> list[str]:
    args = []
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def reachable(path: Path, uid: int) -> bool:
    """Whether ``uid`` can look up ``path`` with the permission bits alone.

    Parameters
    ----------
    path : pathlib.Path
        An absolute path.
    uid : int
        An unprivileged uid, assumed to be in none of the directories' groups.

    Returns
    -------
    bool
        True if every parent directory lets others (or ``uid``, as its owner) search it.
    """
    for parent in [*reversed(path.parents)]:
        mode = os.stat(parent)
        if not (mode.st_mode & 0o001 or (mode.st_uid == uid and mode.st_mode & 0o100)):
            return False
    return True


@functools.lru_cache(maxsize=None)
def matplotlib_font_cache() -> tuple[str, bytes] | None:
    """The grader's matplotlib font list, to copy into each sandbox.

    A fresh sandbox has an empty ``MPLCONFIGDIR``: without this copy, every
    graded notebook that imports matplotlib would spend seconds rebuilding it.

    Returns
    -------
    tuple of (str, bytes) or None
        The cache file's name and content (matplotlib builds it on import if
        missing), or None when the grader has no matplotlib.
    """
    try:
        import matplotlib
        from matplotlib import font_manager
    except ImportError:
        return None
    path = Path(matplotlib.get_cachedir()) / f"fontlist-v{font_manager.FontManager.__version__}.json"
    return (path.name, path.read_bytes()) if path.is_file() else None


@functools.lru_cache(maxsize=None)
def python_prefixes(python: str) -> list[Path]:
    """Where the Python at ``python`` lives: its environment and its installation.

    Parameters
    ----------
    python : str
        Path of a Python executable.

    Returns
    -------
    list of pathlib.Path
        Its ``sys.prefix`` and ``sys.base_prefix`` (equal outside a virtual environment).

    Raises
    ------
    SandboxError
        If that Python does not run.
    """
    if python == sys.executable:
        return [Path(sys.prefix), Path(sys.base_prefix)]
    try:
        done = subprocess.run([python, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
                              capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"the kernel's Python {python!r} does not run: {error}") from error
    return [Path(line) for line in done.stdout.splitlines()[:2]]


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def package_dir(name: str) -> Path | None:
    """Where the grader would import ``name`` from, without importing it.

    Parameters
    ----------
    name : str
        A top-level package or module name.

    Returns
    -------
    pathlib.Path or None
        The package's directory (or the module's file), or None if it is not importable.
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve() if spec.origin else None


def hidden_copies(name: str, roots: list[Path]) -> list[Path]:
    """Every copy of module/package ``name`` that the kernel could import from the bound ``roots``.

    Parameters
    ----------
    name : str
        The package to hide (``autograder``).
    roots : list of pathlib.Path
        The host paths bound into the sandbox.

    Returns
    -------
    list of pathlib.Path
        Copies found in the grader's ``sys.path`` directories that lie inside a
        bound root (``site-packages`` of a non-editable install), and where the
        grader itself imports ``name`` from if that is inside a bound root.
    """
    found: set[Path] = set()
    candidates = [package_dir(name)]
    for entry in sys.path:
        base = Path(entry or os.getcwd()).resolve()
        if base.is_dir() and _within(base, roots):
            candidates += [base / name, base / f"{name}.py", *base.glob(f"{name}.*.so")]
    for path in candidates:
        if path is not None and path.exists() and _within(path, roots):
            found.add(path)
    return sorted(found)


class SandboxedKernelManager(AsyncKernelManager):
    """Start the grader's Python kernel in a bubblewrap sandbox with resource limits.

    The notebook's kernelspec is ignored: whatever it names ("bash", a
    kernel that does not exist), the kernel is ``<python> -m
    ipykernel_launcher`` of the grader's environment. All limits are
    configurable, e.g. ``c.SandboxedKernelManager.memory_limit = 4 * 2**30``.
    """

    bwrap = Unicode("bwrap", help="Name or path of the bubblewrap executable.").tag(config=True)
    python = Unicode(sys.executable, help="Python of the kernel (its environment must have ipykernel).").tag(
        config=True)
    kernel_uid = Integer(65534, help="Unprivileged uid/gid of the kernel (nobody).").tag(config=True)
    memory_limit = Integer(2 * 2**30, help="Address-space limit of each kernel process, bytes (RLIMIT_AS).").tag(
        config=True)
    cpu_time_limit = Integer(300, help="CPU-time limit of the kernel, seconds (RLIMIT_CPU).").tag(config=True)
    file_size_limit = Integer(64 * 2**20, help="Largest file the kernel may write, bytes (RLIMIT_FSIZE).").tag(
        config=True)
    process_limit = Integer(64, help="Processes and threads of the kernel's uid (RLIMIT_NPROC; needs the "
                                     "grader to run as root, see above).").tag(config=True)
    open_files_limit = Integer(1024, help="Open file descriptors per process (RLIMIT_NOFILE).").tag(config=True)
    scratch_size = Integer(256 * 2**20, help="Size of each private tmpfs (working dir, /tmp, /dev/shm), bytes.").tag(
        config=True)
    student_packages = List(Unicode(), ["attention_lab"],
                            help="Packages whose directory the kernel may read (the student package).").tag(config=True)
    hidden_packages = List(Unicode(), ["autograder"],
                           help="Packages masked if importable from any bound directory.").tag(config=True)
    extra_read_only_paths = List(Unicode(), [],
                                 help="More host paths the kernel may read (same path inside).").tag(config=True)
    runtime_root = Unicode(help="Where the private runtime directories (ipc sockets) are created.").tag(config=True)
    hide_host_paths = Bool(True, help="Mount the kernel's Python and the student packages at neutral paths "
                                      "(/opt/python, /opt/venv, /opt/packages) from an image outside the course "
                                      "directory, so that /proc/self/mountinfo names neither the course nor the "
                                      "user (autograder/sandbox_image.py).").tag(config=True)
    max_message_bytes = Integer(16 * 2**20, help="Largest single message accepted from the kernel, bytes "
                                                 "(a larger one is lost).").tag(config=True)

    @default("runtime_root")
    def _runtime_root_default(self):
        return tempfile.gettempdir()

    @default("transport")
    def _transport_default(self):
        return "ipc"

    @default("client_factory")
    def _client_factory_default(self):
        return CappedKernelClient

    def __init__(self, *args, **kwargs):
        kwargs.pop("kernel_name", None)  # the notebook's kernelspec never chooses what runs
        super().__init__(*args, **kwargs)
        self.transport = "ipc"
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="al-kernel-", dir=self.runtime_root))
        os.chmod(self.runtime_dir, 0o711)  # the kernel's uid resolves the paths below, without listing
        self.ipc_dir = self.runtime_dir / "ipc"
        self.ipc_dir.mkdir()
        # the kernel (another uid when the grader is root) binds its sockets here until sealed
        os.chmod(self.ipc_dir, 0o777)
        self.connection_file = str(self.ipc_dir / "kernel.json")
        self.ip = str(self.ipc_dir / "kernel")
        self.log_path = self.runtime_dir / "kernel.log"
        self._sealed = False
        self.last_log = ""

    # ---- the kernel that runs, whatever the notebook says ---------------------------------------

    @property
    def kernel_spec(self) -> KernelSpec:
        if self._kernel_spec is None:
            self._kernel_spec = KernelSpec(
                argv=[self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="Python 3 (grading sandbox)", language="python",
                interrupt_mode="message",  # a signal to bwrap would not reach the kernel's new session
                env={}, metadata={}, resource_dir="")
        return self._kernel_spec

    @property
    def ipykernel(self) -> bool:
        return True

    def client(self, **kwargs):
        kwargs.setdefault("max_message_bytes", self.max_message_bytes)
        client = super().client(**kwargs)
        if not isinstance(client, CappedKernelClient):
            raise SandboxError(f"a sandboxed kernel needs the capped client, not {type(client).__name__}")
        return client

    def write_connection_file(self, **kwargs) -> None:
        super().write_connection_file(**kwargs)
        os.chmod(self.connection_file, 0o644)  # readable by the kernel's uid; the runtime dir is private

    # ---- the sandbox ---------------------------------------------------------------------------

    def bound_roots(self) -> list[Path]:
        """The host directories bound read-only into the sandbox, at the same path inside.

        Returns
        -------
        list of pathlib.Path
            ``/usr`` and ``extra_read_only_paths`` (with ``hide_host_paths``
            off, also the kernel's Python environment and installation and
            the student packages), resolved, without any that another one contains.

        Raises
        ------
        SandboxError
            If the kernel's Python does not run.
        """
        roots: list[Path] = []
        wanted = [Path(d) for d in SYSTEM_DIRS]
        if self.hide_host_paths:  # the image replaces them (image()), except an installation under /usr
            wanted += [p for p in python_prefixes(self.python) if _within(p.resolve(), [Path("/usr")])]
        else:
            wanted += python_prefixes(self.python) + [p for p in map(package_dir, self.student_packages) if p]
        wanted += [Path(p) for p in self.extra_read_only_paths]
        for path in wanted:
            path = path.resolve()
            if path.exists() and not _within(path, roots):
                roots = [r for r in roots if not _within(r, [path])] + [path]
        return sorted(roots)

    def image(self) -> Image | None:
        """The kernel's Python at neutral paths (:mod:`autograder.sandbox_image`), or None with ``hide_host_paths`` off."""
        if not self.hide_host_paths:
            return None
        prefix, base = python_prefixes(self.python)
        return python_image(self.python, str(prefix), str(base), tuple(self.hidden_packages))

    def package_copies(self) -> Path | None:
        """Fresh copies of the student packages in this kernel's runtime directory, for ``/opt/packages``."""
        found = [p for p in map(package_dir, self.student_packages) if p is not None]
        if not self.hide_host_paths or not found:
            return None
        folder = self.runtime_dir / "packages"
        for package in found:
            if package.is_dir():
                shutil.copytree(package, folder / package.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                folder.mkdir(exist_ok=True)
                shutil.copy(package, folder / package.name)
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return folder

    def bwrap_command(self, kernel_cmd: list[str], notebook_dir: str | None = None) -> tuple[list[str], list[int]]:
        """The full command that starts ``kernel_cmd`` in the sandbox.

        When the grader is root, the command first enters a private mount
        namespace (``unshare``) where every bound directory that the kernel's
        uid could not reach itself (``/root/.pyenv``) is bind-mounted on a
        staging directory it can reach, then drops to that uid (``setpriv``)
        and runs bwrap, which resolves its sources with the kernel's rights.

        Parameters
        ----------
        kernel_cmd : list of str
            The kernel's own command line.
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
            If bwrap cannot work here (:func:`check_sandbox`), or if a bound
            path is ``/`` or holds ``notebook_dir`` (the course directory).
        """
        fds: list[int] = []

        def data(content: str | bytes) -> str:
            # a file bwrap reads the content from; a temporary file, not a pipe: the font list outgrows a pipe
            with tempfile.TemporaryFile(dir=self.runtime_dir) as handle:
                handle.write(content.encode() if isinstance(content, str) else content)
                handle.seek(0)
                fd = os.dup(handle.fileno())
            fds.append(fd)
            return str(fd)

        uid = str(self.kernel_uid)
        as_root = os.geteuid() == 0
        staged: list[tuple[Path, Path]] = []

        def source(path: Path) -> str:
            if not as_root or reachable(path, self.kernel_uid):
                return str(path)
            stage = self.runtime_dir / "stage" / str(len(staged))
            if path.is_dir():
                stage.mkdir(parents=True)
            else:
                stage.parent.mkdir(parents=True, exist_ok=True)
                stage.touch()
            staged.append((path, stage))
            return str(stage)

        args = [check_sandbox(self.bwrap, self.kernel_uid),
                "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                "--uid", uid, "--gid", uid, "--hostname", "grading-sandbox"]
        roots = self.bound_roots()
        exposed = [r for r in roots if r == Path("/") or (notebook_dir and _within(Path(notebook_dir).resolve(), [r]))]
        if exposed:
            raise SandboxError(f"the grading sandbox would show the kernel {exposed[0]}, which holds the course "
                               f"directory ({notebook_dir}); bind narrower paths")
        size = str(self.scratch_size)
        # scratch space first, so that read-only paths under /tmp (if configured) are bound on top of it
        args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
                 "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", WORKDIR]
        for root in roots:
            args += ["--ro-bind", source(root), str(root)]
        image, packages = self.image(), self.package_copies()
        for host, inside in image.mounts if image else ():
            args += ["--ro-bind", source(host), str(inside)]
        if packages is not None:
            args += ["--ro-bind", str(packages), str(INSIDE_PACKAGES)]
        args += _system_links()
        for name in ETC_FILES:
            if os.path.exists(name):
                args += ["--ro-bind", source(Path(name).resolve()), name]
        args += ["--ro-bind-data", data(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                        f"learner:x:{uid}:{uid}:learner:/tmp:/usr/sbin/nologin\n"), "/etc/passwd",
                 "--ro-bind-data", data(f"root:x:0:\nlearner:x:{uid}:\n"), "/etc/group"]
        masks = self.runtime_dir / "masks"
        for name in self.hidden_packages:
            for number, copy in enumerate(hidden_copies(name, roots)):
                mask = masks / f"{name}-{number}"
                mask.parent.mkdir(parents=True, exist_ok=True)
                if copy.is_dir():
                    mask.mkdir()
                    (mask / "__init__.py").write_text(MASK_SOURCE.format(name=name))
                else:
                    mask.write_text(MASK_SOURCE.format(name=name))
                args += ["--ro-bind", str(mask), str(copy)]
        fonts = matplotlib_font_cache() if self.python == sys.executable else None
        if fonts is not None:
            args += ["--file", data(fonts[1]), f"{self.kernel_env()['MPLCONFIGDIR']}/{fonts[0]}"]
        args += ["--bind", str(self.ipc_dir), str(self.ipc_dir), "--chdir", WORKDIR, "--remount-ro", "/",
                 "--clearenv"]
        for key, value in self.kernel_env().items():
            args += ["--setenv", key, value]
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]  # a budget on the grading process caps its kernel too
        memory = self.memory_limit if hard == resource.RLIM_INFINITY else min(self.memory_limit, hard)
        limits = ["/usr/bin/prlimit", f"--as={memory}", "--core=0", f"--fsize={self.file_size_limit}",
                  f"--nproc={self.process_limit}",
                  # SIGXCPU at the limit (fatal unless handled), SIGKILL a little later
                  f"--cpu={self.cpu_time_limit}:{self.cpu_time_limit + 5}",
                  f"--nofile={self.open_files_limit}", "--"]
        command = args + ["--"] + limits + kernel_cmd
        if as_root:
            mounts = [str(p) for pair in staged for p in pair]
            command = ["/usr/bin/unshare", "--mount", "--propagation", "private", "--",
                       "/bin/sh", "-c", STAGE_AND_DROP.format(uid=uid), "sh", *mounts, "--", *command]
        return command, fds

    def kernel_env(self) -> dict[str, str]:
        """The kernel's whole environment (bwrap starts it from an empty one).

        Returns
        -------
        dict of str to str
            PATH, HOME=/tmp, LANG, OPENBLAS_NUM_THREADS=1, MPLBACKEND=Agg,
            MPLCONFIGDIR and IPYTHONDIR under /tmp, PYTHONDONTWRITEBYTECODE=1,
            and nbgrader's NBGRADER_EXECUTION (NBGRADER_VALIDATING) as set in the grader.
        """
        image = self.image()
        env = {
            "PATH": f"{image.bin_dir if image else Path(self.python).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp/matplotlib",
            "IPYTHONDIR": "/tmp/ipython",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if self.hide_host_paths and any(map(package_dir, self.student_packages)):
            env["PYTHONPATH"] = str(INSIDE_PACKAGES)
        if image and image.library_dir:
            env["LD_LIBRARY_PATH"] = image.library_dir
        for key in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING"):
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        image = self.image()
        if image and kernel_cmd and kernel_cmd[0] == self.python:
            kernel_cmd = [image.python, *kernel_cmd[1:]]  # the same interpreter, at its neutral path inside
        cmd, fds = self.bwrap_command(kernel_cmd, kw.get("cwd"))
        kw["env"] = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        kw["cwd"] = str(self.runtime_dir)
        kw["pass_fds"] = tuple(fds)
        log = open(self.log_path, "wb")  # the kernel's own writes to it are capped by RLIMIT_FSIZE
        kw["stdout"] = kw["stderr"] = log
        kw["stdin"] = subprocess.DEVNULL
        try:
            await super()._async_launch_kernel(cmd, **kw)
        finally:
            log.close()
            for fd in fds:
                os.close(fd)

    def seal(self) -> None:
        """Once the kernel's sockets exist: stop it from creating files in the runtime directory.

        Only effective when the kernel runs as another uid (grader is root).
        """
        if not self._sealed:
            os.chmod(self.ipc_dir, 0o755)
            self._sealed = True

    # ---- after it stopped --------------------------------------------------------------------

    def exit_status(self) -> int | None:
        """How the sandbox ended.

        Returns
        -------
        int or None
            None while it runs; else bwrap's exit code (the kernel's, or 128 +
            the signal that killed it), or minus the signal that killed bwrap itself.
        """
        process = getattr(self.provisioner, "process", None)
        return None if process is None else process.poll()

    def log_tail(self, limit: int = 2000) -> str:
        """The end of what bwrap and the kernel wrote to their stdout/stderr, to diagnose a failed start.

        Parameters
        ----------
        limit : int
            Bytes to read from the end.

        Returns
        -------
        str
            The text ("" if there is none).
        """
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.path.getsize(self.log_path) - limit))
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def kill_sandbox(self) -> None:
        """SIGKILL the whole sandbox now (thread-safe; used by the wall-clock limit)."""
        pgid = getattr(self.provisioner, "pgid", None)
        if pgid:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await KernelManager._async_cleanup_resources(self, restart=restart)
        if self.runtime_dir.exists():
            self.last_log = self.log_tail()  # kept for the message of a sandbox that did not start
            shutil.rmtree(self.runtime_dir, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources  # AsyncKernelManager aliases the base class's function

    def __del__(self):
        if getattr(self, "runtime_dir", None) is not None and self.runtime_dir.exists():
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
        super().__del__()


def signal_name(number: int) -> str:
    """``"SIGKILL"`` for 9, or ``"signal N"``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"

