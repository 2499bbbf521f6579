"""The grading sandbox against hostile and broken notebooks: each runs through SandboxedExecute directly.

Each notebook is built here with nbformat and executed the way ``nbgrader
autograde`` executes a submission (the notebook's directory as the resources
path, inside a course directory); the tests assert what the kernel could and
could not do, and the one-line outcome recorded for the grading table.

Kernel starts are shared where the behaviours can share a kernel: one nosy
notebook (:func:`nosy`) probes what the kernel sees, its identity, the
network, the default limits, the per-cell timeout and the code after the last
cell; one runs floods of output; one runs under changed limits. A notebook
that ends its kernel (a death, the CPU-time limit, the wall clock) has a kernel
of its own. Nothing here measures time: a limit's test asserts that the kernel
was stopped and the reason given for it.

The last tests scan the repository's source for uses of private names of
jupyter_client, nbclient, nbconvert and nbgrader (:func:`private_uses`).
"""

from __future__ import annotations

import ast
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from jupyter_client.provisioning import KernelProvisionerFactory
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from autograder.sandbox import (AFTER_LAST_CELL, NO_CELL_TIMEOUT, PROVISIONER_NAME, SandboxedExecute, SandboxedKernelManager,
                                SandboxError, SandboxProvisioner, check_sandbox)
from autograder.sandbox.caps import data_bytes, head, text_bytes
from autograder.sandbox.command import sandbox_command
from autograder.sandbox.mounts import hidden_copies, kernel_image, reachable
from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux-only")

AS_ROOT = os.geteuid() == 0
NOBODY = 65534
MiB = 2**20
PROBE_MIME = "application/vnd.attention-lab.probe+json"
#: The grader's interpreter as the kernel sees it: at its neutral path (/opt/venv/bin/python) in the image.
KERNEL_PYTHON = kernel_image(SandboxProvisioner(), sys.executable).python


def notebook(cells: dict[str, str] | list[str], kernelspec: str = "python3") -> nbformat.NotebookNode:
    """A submission: a Markdown cell, then one code cell per source (so the first code cell is cell 2)."""
    sources = list(cells.values()) if isinstance(cells, dict) else list(cells)
    nb = new_notebook(cells=[new_markdown_cell("# a submission")] + [new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": kernelspec, "display_name": kernelspec, "language": "python"}
    return nb


def run(nb, path=None, executor=None, kernel=None, after_last_cell=None, no_cell_timeout=(), **traits):
    """Execute ``nb`` in the sandbox as nbgrader would; returns the executed notebook (validated)."""
    config = Config()
    for name, value in (kernel or {}).items():
        setattr(config.SandboxedKernelManager, name, value)
    executor = executor or SandboxedExecute(config=config, **{"timeout": 3, "wall_clock_limit": 30, **traits})
    resources = {"metadata": {"path": str(path or REPO)}, "nbgrader": {"student": "me", "assignment": "01_x"}}
    if after_last_cell is not None:
        resources[AFTER_LAST_CELL] = after_last_cell
    resources[NO_CELL_TIMEOUT] = frozenset(no_cell_timeout)
    nb, _ = executor.preprocess(nb, resources)
    nbformat.validate(nb)  # what the executor stored is a valid notebook (the notes, the trimmed outputs)
    return nb


def code(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def named(nb, cells: dict[str, str]) -> dict[str, nbformat.NotebookNode]:
    return dict(zip(cells, code(nb)))


def stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def errors(cell) -> list[str]:
    return [o.ename for o in cell.outputs if o.output_type == "error"]


def execution(nb) -> dict:
    return nb.metadata["attention_lab"]["execution"]


def report(cell) -> dict:
    """The JSON a probing cell printed as its last line."""
    return json.loads(stdout(cell).strip().splitlines()[-1])


def grader_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# A probing cell: try each (action, path) and report what happened, by exception name.
ATTEMPTS = '''
import errno, json, os
def attempt(action, path):
    try:
        if action == "read":
            with open(path, "rb") as f:
                f.read(16)
        elif action == "write":
            with open(path, "wb") as f:
                f.write(b"overwritten by a learner")
        elif action == "list":
            return sorted(os.listdir(path))
        return "allowed"
    except OSError as error:
        return f"{type(error).__name__}:{errno.errorcode.get(error.errno)}"
    except Exception as error:
        return type(error).__name__
print(json.dumps({f"{action} {path}": attempt(action, path) for action, path in CHECKS}))
'''


def probing_cell(checks) -> str:
    return f"CHECKS = {checks!r}\n{ATTEMPTS}"


@pytest.fixture(autouse=True, scope="module")
def _nbgrader_execution():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBGRADER_EXECUTION", "autograde")  # as nbgrader sets it around execution
        yield


# ---- one nosy notebook: what the kernel sees, who it is, the network, the default limits ----------------

SECRETS = {
    "gradebook.db": b"SQLite format 3\x00 the grades of every student",
    "nbgrader_config.py": b"c = get_config()\n",
    "source/01_x/nb.ipynb": b'{"the": "solutions"}',
    "release/01_x/nb.ipynb": b'{"the": "release"}',
    "autograder/assignments/a01_attention/reference.py": b"def softmax(x): return 'the reference'\n",
    "submitted/other-student/01_x/nb.ipynb": b'{"another": "submission"}',
    "autograded/other-student/01_x/nb.ipynb": b'{"another": "graded submission"}',
    "autograded/me/01_x/support.txt": b"a file next to my notebook",
}

NETWORK = '''
import errno, json, socket
def attempt(connect):
    try:
        connect()
        return "connected"
    except Exception as error:
        return type(error).__name__ + ":" + str(errno.errorcode.get(getattr(error, "errno", None)))
print(json.dumps({{
    "grader's localhost": attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2)),
    "internet": attempt(lambda: socket.create_connection(("1.1.1.1", 80), timeout=2)),
    "dns": attempt(lambda: socket.getaddrinfo("example.com", 80)),
}}))'''

LIMITS = ("import resource\nprint(*(resource.getrlimit(getattr(resource, 'RLIMIT_' + name)) for name in "
          "('CORE', 'AS', 'FSIZE', 'NOFILE', 'CPU', 'NPROC')))")

AFTER_LAST = {"probe": "x += 1\nprint('STOLEN')\nshown.update('STOLEN')\n"
                       "from IPython.display import publish_display_data\n"
                       f"publish_display_data({{'{PROBE_MIME}': {{'grade_id': 'g', 'x': x}}}})",
              "error": "import sys\nprint('STOLEN', file=sys.stderr)\n1 / 0"}


@pytest.fixture(scope="module")
def nosy(tmp_path_factory):
    """One notebook (kernelspec "bash", which would name another kernel) that tries everything a learner might."""
    import pwd

    root = tmp_path_factory.mktemp("nosy") / "course"
    for name, content in SECRETS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    here = root / "autograded/me/01_x"
    reads = [("read", str(root / name)) for name in SECRETS]
    reads += [("read", "../../../gradebook.db"), ("read", "../../gradebook.db"), ("list", str(root)),
              ("list", str(here)), ("read", "/etc/shadow"), ("read", os.path.expanduser("~/.bash_history")),
              ("read", str(REPO / "autograder/assignments/a01_attention/reference.py")), ("list", str(REPO / "source")),
              ("read", str(REPO / "nbgrader_config.py"))]
    writes = [("write", str(root / name)) for name in ("gradebook.db", "submitted/other-student/01_x/nb.ipynb",
                                                        "autograded/me/01_x/nb.ipynb", "new-file")]
    writes += [("write", str(REPO / "autograder/assignments/a01_attention/reference.py")), ("write", str(REPO / "gradebook.db"))]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    cells = {
        "numpy": "import numpy as np\nfrom attention_lab.core import plots\nprint(np.arange(12.0).reshape(3, 4).sum(axis=1))",
        "identity": "import os\nprint(os.getuid(), os.getgid(), os.getcwd(), os.environ['HOME'], "
                    "os.environ['NBGRADER_EXECUTION'])",
        "matplotlib": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('/tmp/figure.png')\n"
                      "print(os.path.getsize('/tmp/figure.png') > 0)",
        "files": probing_cell(reads + writes),
        "exists": f"print(os.path.exists({str(REPO)!r}), os.path.exists({os.path.expanduser('~')!r}))",
        "write package": f"open({str(REPO / 'attention_lab' / 'evil.py')!r}, 'w')",
        "mountinfo": "print(repr(open('/proc/self/mountinfo').read()))",
        "cwd": "print(repr(os.readlink('/proc/self/cwd')), repr(os.getcwd()))",
        "environ": "print(repr(open('/proc/self/environ').read()))",
        "paths": "import attention_lab, sys\n"
                 "print(repr((attention_lab.__file__, sys.prefix, sys.base_prefix, sys.executable, sys.path)))",
        "maps": "print(repr(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libpython' in line})))",
        "import autograder": "import autograder",
        "from autograder": "from autograder.assignments.a01_attention import reference",
        "sys.path": "print([p for p in sys.path if 'autograder' in p])",
        "network": NETWORK.format(port=listener.getsockname()[1]),
        "interpreter": "print(sys.executable, os.getuid())",
        "limits": LIMITS,
        "sys.exit": "sys.exit()",
        "SystemExit": "raise SystemExit(3)",
        "loop": "while True:\n    pass",
        "after loop": "print('next cell')",
        "display": "x = 41\nfrom IPython.display import display\nshown = display('as the cell left it', display_id=True)",
    }
    nb = notebook(cells, kernelspec="bash")
    # a kernelspec in the notebook may even name a provisioner: it chooses nothing either
    nb.metadata["kernelspec"]["metadata"] = {"kernel_provisioner": {"provisioner_name": "local-provisioner"}}
    seen = SimpleNamespace(sockets_owner={}, after_last_cell=[], runtime_dir=None)

    def record_owner(notebook):
        seen.runtime_dir = executor.km.sandbox.runtime_dir
        ipc = executor.km.sandbox.ipc_dir
        seen.sockets_owner.update({p.name: p.stat().st_uid for p in ipc.iterdir() if p.is_socket()})

    def after_last_cell(nb, run_code):
        seen.after_last_cell += [len(nb.cells), run_code(AFTER_LAST["probe"]), run_code(AFTER_LAST["error"])]

    executor = SandboxedExecute(timeout=3, wall_clock_limit=60, on_notebook_start=record_owner)
    reference_before = (REPO / "autograder/assignments/a01_attention/reference.py").read_bytes()
    try:
        nb = run(nb, path=here, executor=executor, after_last_cell=after_last_cell)
    finally:
        listener.close()
    return SimpleNamespace(nb=nb, cells=named(nb, cells), root=root, user=pwd.getpwuid(os.geteuid()),
                           reference_before=reference_before, **vars(seen))


def test_an_honest_notebook_runs_as_nobody_with_numpy_matplotlib_and_the_student_package(nosy):
    cells = nosy.cells
    assert stdout(cells["numpy"]) == "[ 6. 22. 38.]\n"
    assert stdout(cells["identity"]).split() == [str(NOBODY), str(NOBODY), "/home/learner", "/tmp", "autograde"]
    assert stdout(cells["matplotlib"]) == "True\n"
    assert not [o for name in ("numpy", "identity", "matplotlib") for o in cells[name].outputs
                if o.output_type != "stream" or o.name != "stdout"]
    assert execution(nosy.nb) == {"status": "ok", "reason": "all cells ran"}
    if AS_ROOT:  # the kernel's sockets were made by an unprivileged uid on the host, too
        assert nosy.sockets_owner and set(nosy.sockets_owner.values()) == {NOBODY}
    # the provisioner's runtime directory (sockets, connection file, log, package copy) is gone afterwards
    assert nosy.runtime_dir.name.startswith("al-kernel-") and not nosy.runtime_dir.exists()


def test_the_notebooks_kernelspec_chooses_nothing(nosy):
    # "bash", with a provisioner of its own: the grader's interpreter ran, at its neutral path, as nobody
    assert stdout(nosy.cells["interpreter"]) == f"{KERNEL_PYTHON} {NOBODY}\n"


def test_the_course_directory_and_the_repository_are_invisible(nosy):
    found = report(nosy.cells["files"])
    assert len(found) == len(SECRETS) + 9 + 6
    # A repository under /tmp (as in a CI clone) is, inside the sandbox, inside the kernel's private /tmp: a
    # write there lands in that throw-away tmpfs, never on the host (checked below), so it may be "allowed".
    private_repo = Path("/tmp") in REPO.parents
    for attempt, outcome in found.items():
        if outcome == "allowed" and private_repo and attempt.startswith("write") and str(REPO) in attempt:
            continue
        # not there at all, not allowed, or (creating a file where nothing is bound) a read-only file system
        assert outcome in ("FileNotFoundError:ENOENT", "PermissionError:EACCES", "OSError:EROFS"), \
            f"{attempt}: {outcome}"
        assert outcome != "OSError:EROFS" or attempt.startswith("write"), attempt
    # neither the repository (which holds the Python environment and the student package) nor the home
    # directory (which holds pyenv) exists inside: both are mounted from an image at neutral paths
    assert stdout(nosy.cells["exists"]).split() == ["False", "False"]
    assert errors(nosy.cells["write package"]) == ["FileNotFoundError"]
    # the grader still reads everything, unchanged, and nothing was added
    for name, content in SECRETS.items():
        assert (nosy.root / name).read_bytes() == content
    assert not (nosy.root / "new-file").exists() and not (REPO / "attention_lab" / "evil.py").exists()
    assert not (REPO / "gradebook.db").exists() or b"learner" not in (REPO / "gradebook.db").read_bytes()
    assert nosy.reference_before == (REPO / "autograder/assignments/a01_attention/reference.py").read_bytes()


def test_proc_shows_neither_the_course_path_nor_the_host_user(nosy):
    shown = {name: stdout(nosy.cells[name]) for name in ("mountinfo", "cwd", "environ", "paths", "maps")}
    assert "/opt/venv" in shown["mountinfo"] and "/opt/packages" in shown["mountinfo"], shown["mountinfo"]
    user = nosy.user
    secrets = {"the course directory": str(nosy.root), "the repository": str(REPO),
               "the user's home": user.pw_dir + "/", "the Python environment's host path": sys.prefix,
               "the interpreter's host path": sys.base_prefix}
    for where, text in shown.items():
        for what, secret in secrets.items():
            assert secret not in text, f"{where} shows {what} ({secret})"
        assert f"USER={user.pw_name}" not in text and f"LOGNAME={user.pw_name}" not in text
    assert shown["cwd"].split() == ["'/home/learner'", "'/home/learner'"]
    # the interpreter runs on its own libpython, not another build of the same version (Debian's under /usr)
    host_lib = sorted(Path(sys.base_prefix).glob("lib/libpython*.so*"))
    if host_lib and not (Path(sys.base_prefix) == Path("/usr") or Path("/usr") in Path(sys.base_prefix).resolve().parents):
        assert shown["maps"].strip() == repr([f"/opt/python/lib/{host_lib[0].resolve().name}"])


def test_import_autograder_fails(nosy):
    assert errors(nosy.cells["import autograder"]) == ["ModuleNotFoundError"]
    assert errors(nosy.cells["from autograder"]) == ["ModuleNotFoundError"]
    assert stdout(nosy.cells["sys.path"]) == "[]\n"


def test_no_network(nosy):
    found = report(nosy.cells["network"])
    assert found["grader's localhost"] == "ConnectionRefusedError:ECONNREFUSED"  # its own loopback: nobody listens
    assert found["internet"] == "OSError:ENETUNREACH" and found["dns"].startswith("gaierror")


def test_the_default_limits_apply_inside(nosy):
    # c.SandboxedKernelManager's defaults (autograder/sandbox/limits.py), through the kernelspec to prlimit:
    # RLIMIT_CORE, _AS, _FSIZE, _NOFILE, _CPU (soft: SIGXCPU, hard: SIGKILL), _NPROC
    assert stdout(nosy.cells["limits"]) == (f"(0, 0) ({2 * 2**30}, {2 * 2**30}) ({64 * MiB}, {64 * MiB}) "
                                            "(1024, 1024) (300, 305) (64, 64)\n")


def test_sys_exit_is_an_error_but_the_kernel_lives(nosy):
    assert errors(nosy.cells["sys.exit"]) == ["SystemExit"] and errors(nosy.cells["SystemExit"]) == ["SystemExit"]
    assert stdout(nosy.cells["after loop"]) == "next cell\n"


def test_an_infinite_loop_is_interrupted_and_the_rest_runs(nosy):
    assert errors(nosy.cells["loop"])[0] in ("KeyboardInterrupt", "CellTimeoutError")
    assert stdout(nosy.cells["after loop"]) == "next cell\n"
    assert execution(nosy.nb)["status"] == "ok"


def test_code_after_the_last_cell_runs_in_the_same_kernel_and_only_its_grading_output_is_kept(nosy):
    cells, probe, error = nosy.after_last_cell
    assert cells == len(nosy.nb.cells)  # the extra code is not stored in the notebook
    assert [o.data[PROBE_MIME]["x"] for o in probe] == [42]  # the kernel's own x = 41, plus one
    assert error == []
    assert "STOLEN" not in json.dumps(nosy.nb) and "as the cell left it" in json.dumps(nosy.nb)


# ---- floods of output --------------------------------------------------------------------------

def test_floods_of_output_keep_only_the_caps_in_the_grader():
    before = grader_peak_mib()
    cells = {"flood": "import sys\nfor i in range(500):\n    sys.stdout.write('x' * 10**6)\n    sys.stdout.flush()",
             "after flood": "print('next cell')",
             "huge": "print('x' * 20_000_000)",  # one message over the 16 MiB cap (MessageLimits.max_message_bytes)
             "after huge": "print('next cell')"}
    # the IOPub wait is what a cell whose message was lost costs; 1 s lost the flood's last outputs on a loaded machine
    nb = run(notebook(cells), timeout=60, max_cell_output_bytes=MiB, iopub_timeout=10)
    shown = named(nb, cells)
    flood = shown["flood"]
    assert sum(len(o.get("text", "")) for o in flood.outputs if "truncated" not in o.get("text", "")) == MiB
    dropped = int(flood.outputs[-1].text.split("output truncated: ")[1].split()[0])
    assert 400_000_000 < dropped <= 500 * 10**6 - MiB
    assert errors(shown["huge"]) == ["OutputIncomplete"] and "larger than 16 MiB" in shown["huge"].outputs[-1].evalue
    assert stdout(shown["after flood"]) == stdout(shown["after huge"]) == "next cell\n"
    assert execution(nb)["status"] == "ok"
    assert f"{dropped} bytes dropped" in execution(nb)["reason"]
    assert "1 message(s) over 16 MiB lost" in execution(nb)["reason"]
    assert grader_peak_mib() - before < 200, "the grader's memory grew by 200 MiB or more"


# ---- changed limits: processes, files, scratch space, memory, and a masked copy of autograder --------------

def test_changed_limits_hold_and_a_copy_of_autograder_in_a_bound_directory_is_masked(tmp_path):
    # as after a non-editable install: autograder sits in a directory the kernel may read (site-packages)
    site = tmp_path / "site-packages"
    (site / "autograder").mkdir(parents=True)
    (site / "autograder" / "__init__.py").write_text("SECRET = 'the reference'\n")
    cells = {
        "fork bomb": "import os\ntry:\n    while True:\n        os.fork()\n"
                     "except OSError as error:\n    failure = type(error).__name__",
        "processes": "import os\nprint(failure, len([p for p in os.listdir('/proc') if p.isdigit()]))",
        "big file": "try:\n    open('/tmp/big', 'wb').write(b'x' * 3 * 2**20)\nexcept OSError as error:\n"
                    "    print(error.strerror)",
        "scratch": "import os\nfor i in range(4):\n    try:\n        open(f'/home/learner/part{i}', 'wb').write(b'x' * 2**20)\n"
                   "    except OSError as error:\n        print(i, error.strerror)",
        "limits": LIMITS,
        "import mask": f"import sys\nsys.path.insert(0, {str(site)!r})\nimport autograder",
        "read mask": f"print(open({str(site / 'autograder' / '__init__.py')!r}).read())",
        "memory at once": "x = bytearray(8 * 2**30)",
        "memory growing": "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))",
        "after memory": "del chunks\nprint('still here')",
    }
    before = grader_peak_mib()
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        assert hidden_copies("autograder", [site]) == [site / "autograder"]
        nb = run(notebook(cells), timeout=20, kernel={
            "process_limit": 32, "file_size_limit": MiB, "scratch_size": 3 * MiB // 2, "memory_limit": 2**30,
            "extra_read_only_paths": [str(site)]})
    shown = named(nb, cells)
    if AS_ROOT:  # RLIMIT_NPROC counts the kernel's own uid, which is only separate when the grader is root
        failure, processes = stdout(shown["processes"]).split()
        assert failure == "BlockingIOError" and int(processes) <= 32
    assert stdout(shown["big file"]) == "File too large\n"
    assert "No space left on device" in stdout(shown["scratch"])
    assert f"({2**30}, {2**30}) ({MiB}, {MiB})" in stdout(shown["limits"])
    assert errors(shown["import mask"]) == ["ImportError"] and "hides it" in shown["import mask"].outputs[-1].evalue
    assert "SECRET" not in stdout(shown["read mask"]) and "ImportError" in stdout(shown["read mask"])
    assert errors(shown["memory at once"]) == ["MemoryError"]
    if execution(nb)["status"] == "ok":  # CPython raises MemoryError at the address-space limit ...
        assert errors(shown["memory growing"]) == ["MemoryError"] and stdout(shown["after memory"]) == "still here\n"
    else:  # ... or, if an allocation fails where it cannot, the kernel dies of it
        assert execution(nb)["status"] == "died" and "memory" in execution(nb)["reason"]
    assert grader_peak_mib() - before < 200, "the grader's memory grew by 200 MiB or more"


# ---- limits that stop the kernel -----------------------------------------------------------------

def test_a_cell_named_in_no_cell_timeout_outlasts_the_per_cell_timeout_and_the_others_do_not():
    """A test cell whose case counts CPU time (assignment 7's memory case) is not cut by the per-cell wall clock."""
    slow = "import threading\nthreading.Event().wait(2.5)\nprint('done', flush=True)"
    nb = run(notebook([slow, slow]), timeout=1, wall_clock_limit=30, no_cell_timeout={2})  # cell 2: the second
    first, second = code(nb)
    assert "KeyboardInterrupt" in errors(first) and "done" not in stdout(first)
    assert stdout(second) == "done\n" and not errors(second)
    assert execution(nb)["status"] == "ok"


def test_the_wall_clock_kills_a_loop_that_catches_keyboard_interrupt_and_grading_goes_on():
    executor = SandboxedExecute(timeout=2, wall_clock_limit=6)
    stubborn = notebook(["import threading\nwhile True:\n    try:\n        threading.Event().wait()\n"
                         "    except KeyboardInterrupt:\n        print('interrupt ignored', flush=True)",
                         "print('never')", "print('never either')"], kernelspec="a-kernel-that-does-not-exist")
    nb = run(stubborn, executor=executor)
    assert "interrupt ignored" in stdout(code(nb)[0])  # the per-cell timeout did interrupt it, in vain
    assert executor.sandbox_run.manager.sandbox.returncode == -signal.SIGKILL  # its process group was killed
    assert execution(nb) == {"status": "killed", "reason": "the notebook ran longer than the wall-clock limit of "
                                                           "6 s, so its kernel was stopped in cell 2"}
    assert [errors(cell)[-1:] for cell in code(nb)] == [["KernelStopped"], [], []]
    assert all(not cell.outputs and cell.execution_count is None for cell in code(nb)[1:])
    # the same executor goes on with the next student's notebook, whose kernelspec chooses nothing either
    nb = run(notebook(["import os, sys\nprint(sys.executable, os.getuid())"],
                      kernelspec="a-kernel-that-does-not-exist"), executor=executor)
    assert stdout(code(nb)[0]) == f"{KERNEL_PYTHON} {NOBODY}\n" and execution(nb)["status"] == "ok"


def test_a_stop_seen_while_waiting_for_a_later_cell_is_put_in_the_cell_the_kernel_was_still_running():
    # a short IOPub wait lets nbclient give up on the stubborn cell and send the next ones before the wall clock
    # fires: the kernel never ran them, so the stop belongs to the stubborn cell whichever wait sees it
    executor = SandboxedExecute(timeout=2, iopub_timeout=1, wall_clock_limit=8)
    stubborn = notebook(["import threading\nwhile True:\n    try:\n        threading.Event().wait()\n"
                         "    except KeyboardInterrupt:\n        pass",
                         "print('never')", "print('never either')", "print('nor this')", "print('nor that')"])
    nb = run(stubborn, executor=executor)
    assert execution(nb) == {"status": "killed", "reason": "the notebook ran longer than the wall-clock limit of "
                                                           "8 s, so its kernel was stopped in cell 2"}
    assert errors(code(nb)[0])[-1:] == ["KernelStopped"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code(nb)[1:])


def test_the_cpu_time_limit_stops_the_kernel():
    nb = run(notebook(["while True:\n    pass", "print('never')"]), timeout=30, kernel={"cpu_time_limit": 3})
    assert execution(nb) == {"status": "killed", "reason": "the kernel used more than the CPU-time limit of 3 s "
                                                           "in cell 2"}
    assert not code(nb)[1].outputs


@pytest.mark.parametrize("source, words", [
    ("import os\nos._exit(0)", "ended the kernel's process (exit code 0)"),
    ("import os\nos.kill(os.getpid(), 9)", "killed (SIGKILL)"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", "crashed (SIGSEGV)"),
    ("import os, threading\nthreading.Thread(target=os._exit, args=(3,)).start()\nthreading.Event().wait()",
     "exit code 3"),
], ids=["os._exit", "kill -9", "segfault", "exit-from-a-thread"])
def test_a_kernel_that_dies_skips_the_rest_with_a_reason(source, words):
    nb = run(notebook(["print('before')", source, "print('after')", "1 + 1"]))
    before, dying, *rest = code(nb)
    assert stdout(before) == "before\n"
    assert execution(nb)["status"] == "died" and words in execution(nb)["reason"]
    assert "in cell 3" in execution(nb)["reason"]  # cell 1 is markdown: numbers are the notebook's
    assert errors(dying) == ["KernelStopped"] and dying.outputs[-1].evalue == execution(nb)["reason"]
    assert all(not cell.outputs and cell.execution_count is None for cell in rest)


def test_a_kernel_that_dies_after_the_last_cell_keeps_the_cells_outputs_and_says_when():
    nb = run(notebook(["print('ran')"]), after_last_cell=lambda nb, run_code: run_code("import os\nos._exit(3)"))
    assert stdout(code(nb)[0]) == "ran\n"
    assert execution(nb)["status"] == "died" and "the grader's second pass" in execution(nb)["reason"]


def test_a_sandbox_that_cannot_start_is_an_error_of_the_machine_not_of_the_student():
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "/nonexistent"
    runtime_root = Path(tempfile.mkdtemp(prefix="al-test-runtime-"))  # the kernel's uid must reach it: not tmp_path
    runtime_root.chmod(0o755)
    try:
        with pytest.raises(SandboxError, match="did not start.*No module named ipykernel_launcher"
                           if python == "/usr/bin/python3" else "did not start"):
            run(notebook(["1"]), kernel={"python": python, "runtime_root": str(runtime_root)})
        assert not list(runtime_root.iterdir())  # and left no runtime directory behind
    finally:
        shutil.rmtree(runtime_root)


# ---- the output caps, message by message (no kernel) -------------------------------------------

def message(msg_type, **content):
    return {"msg_type": msg_type, "header": {"msg_type": msg_type}, "parent_header": {"msg_id": "m"},
            "content": content, "metadata": {}}


@pytest.fixture
def capped():
    executor = SandboxedExecute(max_cell_output_bytes=100, max_notebook_output_bytes=150,
                                max_grading_output_bytes=1000)
    executor.reset_execution_trackers()
    return executor


def test_streams_are_trimmed_to_the_cell_cap_with_a_note(capped):
    outs = []
    for _ in range(3):
        capped.output(outs, message("stream", name="stdout", text="a" * 60), None, 0)
    assert [o.text for o in outs] == ["a" * 60, "a" * 40, "\n[output truncated: 80 bytes dropped]\n"]
    assert capped.sandbox_run.caps.dropped_bytes == 80


def test_the_notebook_cap_counts_across_cells_and_a_clear_gives_room_back(capped):
    cell0, cell1 = [], []
    capped.output(cell0, message("stream", name="stdout", text="a" * 100), None, 0)
    capped.output(cell1, message("stream", name="stdout", text="b" * 100), None, 1)
    assert cell1[0].text == "b" * 50 and capped.sandbox_run.caps.dropped_bytes == 50
    capped.clear_output(cell0, message("clear_output", wait=False), 0)
    capped.output(cell1, message("stream", name="stdout", text="c" * 40), None, 1)
    assert [o.text for o in cell1 if "truncated" not in o.text] == ["b" * 50, "c" * 40]


def test_what_grading_reads_is_never_dropped(capped):
    outs = []
    capped.output(outs, message("stream", name="stdout", text="a" * 150), None, 0)  # the cell is full
    capped.output(outs, message("stream", name="stderr", text="warning " * 100), None, 0)
    capped.output(outs, message("error", ename="ValueError", evalue="v" * 10**6, traceback=["t" * 1000] * 100),
                  None, 0)
    capped.output(outs, message("execute_result", data={"text/plain": "0.5", "text/html": "h" * 10**4},
                                metadata={}, execution_count=1), None, 0)
    capped.output(outs, message("display_data", data={PROBE_MIME: {"r": [1] * 100}, "text/plain": "results"},
                                metadata={}), None, 0)
    capped.output(outs, message("display_data", data={"image/png": "i" * 500}, metadata={}), None, 0)
    kinds = [(o.output_type, o.get("name")) for o in outs if "truncated" not in o.get("text", "")]
    assert ("stream", "stderr") in kinds  # present, even if empty: nbgrader scores any stderr as 0
    error = next(o for o in outs if o.output_type == "error")
    assert len(error.evalue) == 2000 and sum(map(len, error.traceback)) <= 20000 + 100
    value = next(o for o in outs if o.output_type == "execute_result")
    assert value.data == {"text/plain": "0.5"}  # the partial-credit value survives; the big HTML does not
    assert any(PROBE_MIME in o.get("data", {}) for o in outs)
    assert not any("image/png" in o.get("data", {}) for o in outs)


def test_repeated_errors_and_values_cannot_flood_the_grader(capped):
    outs = []
    for _ in range(1000):
        capped.output(outs, message("error", ename="E", evalue="e" * 50, traceback=["t" * 50]), None, 0)
        capped.output(outs, message("execute_result", data={"text/plain": "1" * 500}, metadata={},
                                    execution_count=1), None, 0)
    assert 1 <= sum(o.output_type == "error" for o in outs) <= 2
    assert sum(o.output_type == "execute_result" for o in outs) == 1
    assert len(outs) <= 4


def test_a_display_update_over_the_cap_leaves_the_old_display(capped):
    capped.nb = notebook(["display(...)"])
    shown = capped.nb.cells[1]
    capped.process_message(message("display_data", data={"text/plain": "small"}, metadata={},
                                   transient={"display_id": "d"}), shown, 1)
    capped.process_message(message("update_display_data", data={"text/plain": "u" * 500}, metadata={},
                                   transient={"display_id": "d"}), shown, 1)
    assert [o.data["text/plain"] for o in shown.outputs] == ["small"] and capped.sandbox_run.caps.dropped_bytes == 500
    capped.process_message(message("update_display_data", data={"text/plain": "new"}, metadata={},
                                   transient={"display_id": "d"}), shown, 1)
    assert [o.data["text/plain"] for o in shown.outputs] == ["new"]  # under the cap, updates work as in nbclient


def test_sizes_and_heads():
    assert text_bytes("abc") == 3 and text_bytes("é") == 2
    assert head("éé", 3) == "é" and head("abcdef", 4) == "abcd"
    assert data_bytes(["ab", "c"]) == 3 and data_bytes({"a": 1}) == len('{"a": 1}')


# ---- how the provisioner is chosen, configured and what it runs (no kernel) --------------------------

def test_the_kernel_managers_kernelspec_chooses_the_sandbox_provisioner_with_the_configured_limits(tmp_path):
    config = Config()
    config.SandboxedKernelManager.memory_limit = 3 * 2**30
    config.SandboxedKernelManager.cpu_time_limit = 77
    config.SandboxedExecute.wall_clock_limit = 42
    config.Execute.timeout = 7  # nbgrader_config.py sets Execute's options; the subclass follows them
    manager = SandboxedKernelManager(config=config, kernel_name="bash")
    spec = manager.kernel_spec
    assert spec.argv[:3] == [sys.executable, "-m", "ipykernel_launcher"]
    assert spec.metadata["kernel_provisioner"]["provisioner_name"] == PROVISIONER_NAME
    # jupyter_client's own factory finds the provisioner by its entry point (pyproject.toml) and configures it
    provisioner = KernelProvisionerFactory.instance().create_provisioner_instance("k", spec, parent=manager)
    assert type(provisioner) is SandboxProvisioner
    assert (provisioner.memory_limit, provisioner.cpu_time_limit, provisioner.process_limit) == (3 * 2**30, 77, 64)
    executor = SandboxedExecute(config=config)
    assert (executor.wall_clock_limit, executor.timeout, executor.interrupt_on_timeout) == (42, 7, True)
    runtime = tmp_path / "runtime"
    (runtime / "ipc").mkdir(parents=True)
    command, fds = sandbox_command(provisioner, spec.argv[:3], runtime, runtime / "ipc", str(tmp_path / "course"))
    for fd in fds:
        os.close(fd)
    assert f"--as={3 * 2**30}" in command and "--cpu=77:82" in command and "--core=0" in command
    assert {"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--clearenv"} <= set(command)
    assert command[-3:] == [KERNEL_PYTHON, "-m", "ipykernel_launcher"]
    bound = [command[i + 2] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    sources = [command[i + 1] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    assert not [path for path in bound + sources if str(REPO) in path], "the repository is bound"
    assert {"/opt/packages", "/opt/venv"} <= set(bound) and "/etc" not in bound
    exposing = SandboxProvisioner(extra_read_only_paths=[str(tmp_path)])
    with pytest.raises(SandboxError, match="holds the course directory"):
        sandbox_command(exposing, spec.argv[:3], runtime, runtime / "ipc", str(tmp_path / "a"))


def test_a_provisioner_that_is_not_installed_is_reported_with_how_to_install_it(monkeypatch):
    monkeypatch.setattr("autograder.sandbox.manager.PROVISIONER_NAME", "attention-lab-sandbox-not-installed")
    with pytest.raises(SandboxError, match="provisioner .* is not installed: install this project"):
        run(notebook(["1"]))


def test_a_missing_bwrap_is_reported_with_how_to_install_it():
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        check_sandbox("bwrap-that-is-not-installed")
    assert check_sandbox().endswith("bwrap")


def test_only_a_sandboxed_kernel_manager_is_accepted():
    from jupyter_client.manager import AsyncKernelManager

    with pytest.raises(SandboxError, match="only runs kernels of a SandboxedKernelManager"):
        SandboxedExecute(kernel_manager_class=AsyncKernelManager).preprocess(notebook(["1"]), {})


def test_reachable_follows_search_permissions(tmp_path):
    private = tmp_path / "private"
    (private / "inside").mkdir(parents=True)
    os.chmod(private, 0o700)
    assert not reachable(private / "inside", NOBODY)
    os.chmod(private, 0o711)
    assert reachable(private / "inside", NOBODY) == all(os.stat(p).st_mode & 0o001 for p in private.parents)


# ---- public APIs only: no private name of jupyter_client, nbclient, nbconvert or nbgrader ---------------

LIBRARIES = ("jupyter_client", "nbclient", "nbconvert", "nbgrader")
#: Attribute names that hold these libraries' objects in our code, whatever they are called on.
HANDLES = {"km", "kc", "kernel_manager", "kernel_client", "provisioner", "sandbox", "iopub_channel",
           "shell_channel", "control_channel", "stdin_channel", "hb_channel", "session", "coursedir", "gradebook"}


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Module:
    """One source file: its imports (local name -> dotted target) and classes (dotted name -> base targets)."""

    def __init__(self, path: Path, root: Path, source: str | None = None):
        self.path = path
        self.name = module_name(path, root) if source is None else "example"
        self.tree = ast.parse(source if source is not None else path.read_text(), str(path))
        self.imports: dict[str, str] = {}
        package = self.name.rsplit(".", 1)[0] if "." in self.name else ""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        self.classes = {f"{self.name}.{node.name}": [self.dotted(b) for b in node.bases]
                        for node in self.tree.body if isinstance(node, ast.ClassDef)}

    def dotted(self, node) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return self.imports[node.id]
            return f"{self.name}.{node.id}"
        if isinstance(node, ast.Attribute):
            value = self.dotted(node.value)
            return f"{value}.{node.attr}" if value else None
        return None


def is_library(dotted: str | None) -> bool:
    return bool(dotted) and dotted.split(".")[0] in LIBRARIES


def library_classes(modules: list[_Module]) -> dict[str, str]:
    """Our classes that derive from a library class, each with the library class it derives from."""
    bases = {name: targets for module in modules for name, targets in module.classes.items()}
    derived: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, targets in bases.items():
            if name in derived:
                continue
            for target in targets:
                origin = target if is_library(target) else derived.get(target)
                if origin:
                    derived[name] = origin
                    changed = True
                    break
    return derived


class _Scan(ast.NodeVisitor):
    def __init__(self, module: _Module, derived: dict[str, str], found: list[str]):
        self.module, self.derived, self.found = module, derived, found
        self.classes: list[str | None] = []  # the library class each enclosing class derives from (or None)
        self.functions: list[str] = []
        self.typed: list[set[str]] = [set()]  # names bound to library objects, per scope

    def report(self, node, what: str) -> None:
        self.found.append(f"{self.module.path}:{node.lineno}: {what}")

    def in_library_class(self) -> str | None:
        return self.classes[-1] if self.classes else None

    def is_library_type(self, node) -> bool:
        dotted = self.module.dotted(node)
        return is_library(dotted) or dotted in self.derived

    def holds_library_object(self, node) -> str | None:
        """What ``node`` is, if it evaluates to an object of the libraries (or of a class derived from theirs)."""
        if isinstance(node, ast.Name):
            if node.id in ("self", "cls") and self.in_library_class():
                return f"{node.id} (a {self.in_library_class()})"
            if any(node.id in scope for scope in self.typed) or node.id in HANDLES:
                return node.id
            if is_library(self.module.dotted(node)):
                return self.module.dotted(node)
        elif isinstance(node, ast.Attribute):
            if node.attr in HANDLES:
                return ast.unparse(node)
            if is_library(self.module.dotted(node)):
                return self.module.dotted(node)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "super" and self.in_library_class():
                return f"super() (of a {self.in_library_class()})"
            if self.is_library_type(node.func):
                return ast.unparse(node.func) + "(...)"
        return None

    def visit_ImportFrom(self, node):
        if is_library(node.module):
            for part in (node.module or "").split(".") + [alias.name for alias in node.names]:
                if is_private(part):
                    self.report(node, f"imports the private name {part} from {node.module}")
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            if is_library(alias.name) and any(is_private(part) for part in alias.name.split(".")):
                self.report(node, f"imports the private module {alias.name}")

    def visit_ClassDef(self, node):
        origin = self.derived.get(f"{self.module.name}.{node.name}") if not self.classes else None
        if origin:
            for item in node.body:
                names = ([item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else
                         [t.id for t in getattr(item, "targets", [getattr(item, "target", None)])
                          if isinstance(t, ast.Name)] if isinstance(item, (ast.Assign, ast.AnnAssign)) else [])
                for name in names:
                    if is_private(name):
                        self.report(item, f"defines {name} in {node.name}, a subclass of {origin}: "
                                          "it overrides or shadows a private name of the library")
        self.classes.append(origin)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node):
        self.functions.append(node.name)
        self.typed.append(set())
        self.generic_visit(node)
        self.typed.pop()
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        if self.holds_library_object(node.value):
            self.typed[-1].update(t.id for t in node.targets if isinstance(t, ast.Name))
        self.generic_visit(node)

    def visit_With(self, node):
        for item in node.items:
            if isinstance(item.optional_vars, ast.Name) and self.holds_library_object(item.context_expr):
                self.typed[-1].add(item.optional_vars.id)
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Attribute(self, node):
        holder = self.holds_library_object(node.value) if is_private(node.attr) else None
        if holder:
            self.report(node, f"uses {node.attr} of {holder}")
        elif (node.attr == "__init__" and self.is_library_type(node.value)
              and (not self.functions or self.functions[-1] != "__init__")):
            self.report(node, f"calls {ast.unparse(node.value)}.__init__ outside __init__ (re-initialises a live object)")
        self.generic_visit(node)

    def visit_Call(self, node):
        if (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and is_private(node.args[1].value)):
            holder = self.holds_library_object(node.args[0])
            if holder:
                self.report(node, f"{node.func.id}s {node.args[1].value} of {holder}")
        self.generic_visit(node)


def private_uses(paths: list[Path], root: Path, sources: dict[Path, str] | None = None) -> list[str]:
    """Every place in ``paths`` that overrides or uses a private name of jupyter_client, nbclient, nbconvert or nbgrader.

    What it finds: ``from nbclient.x import _y`` (and private modules); in a
    class derived (directly or through our classes, across modules) from one
    of theirs, any ``def _x`` or class attribute ``_x`` (it would override or
    shadow their private names, now or in their next release), and
    ``self._x``, ``cls._x``, ``super()._x``; ``Theirs._x`` and ``Theirs(...)._x``
    on their classes and modules; ``x._y`` where ``x`` was assigned from one of
    their classes (or ours derived from them) in the same scope, or is called
    one of :data:`HANDLES` (``km``, ``kc``, ``provisioner``, ...); the same
    through ``getattr``/``setattr``/``hasattr``/``delattr`` with a literal
    name; and ``Theirs.__init__(...)`` called outside ``__init__``.

    What it cannot see: their objects reached under other names (function
    parameters, return values, containers), names built at run time
    (``getattr(obj, name)``), ``vars(obj)`` / ``obj.__dict__``, and code
    that is not Python source in the repository (strings executed elsewhere).
    """
    sources = sources or {}
    modules = [_Module(path, root, sources.get(path)) for path in paths]
    derived = library_classes(modules)
    found: list[str] = []
    for module in modules:
        _Scan(module, derived, found).visit(module.tree)
    return found


def repository_sources() -> list[Path]:
    """The repository's Python files (tracked or not ignored), without the environment and generated folders."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        paths = [REPO / line for line in listed.stdout.splitlines()]
    else:  # not a git checkout
        paths = [p for p in REPO.rglob("*.py") if not any(part.startswith(".") for part in p.relative_to(REPO).parts)]
    return sorted(p for p in paths if p.is_file())


def test_no_module_overrides_or_uses_a_private_name_of_jupyter_client_nbclient_nbconvert_or_nbgrader():
    paths = repository_sources()
    assert REPO / "autograder/sandbox/execute.py" in paths and len(paths) > 50
    assert private_uses(paths, REPO) == []


def test_the_private_name_scan_finds_each_kind_of_use(tmp_path):
    example = tmp_path / "example.py"
    source = '''
from jupyter_client.manager import AsyncKernelManager, _ShutdownStatus
from nbclient.client import NotebookClient
from nbgrader.preprocessors import Execute
import nbclient.util

class Manager(AsyncKernelManager):
    _kernel_spec = None
    async def _async_launch_kernel(self, cmd, **kw):
        await super()._async_launch_kernel(cmd, **kw)
    def public(self):
        return self._launch_args, getattr(self, "_ready", None), self.provisioner.process

class Deeper(Manager):
    def cleanup(self):
        AsyncKernelManager._async_cleanup_resources(self)

class Runner(Execute):
    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        return self.km._kernel_spec

def elsewhere(nb):
    client = NotebookClient(nb)
    with Manager() as manager:
        manager._connect_control_socket()
    return client._display_id_map, nbclient.util._private, Manager()._owns_kernel

class Unrelated:
    def _fine(self):
        return self._mine
'''
    found = [line.split(": ", 1)[1] for line in private_uses([example], tmp_path, {example: source})]
    expected = ["imports the private name _ShutdownStatus", "defines _kernel_spec in Manager",
                "defines _async_launch_kernel in Manager", "uses _async_launch_kernel of super()",
                "uses _launch_args of self", "getattrs _ready of self",
                "uses _async_cleanup_resources of jupyter_client.manager.AsyncKernelManager",
                "calls NotebookClient.__init__ outside __init__", "uses _kernel_spec of self.km",
                "uses _connect_control_socket of manager", "uses _display_id_map of client",
                "uses _private of nbclient.util", "uses _owns_kernel of Manager(...)"]
    for words in expected:
        assert sum(words in line for line in found) == 1, (words, found)
    assert len(found) == len(expected), found
    assert not [line for line in found if "_fine" in line or "_mine" in line or "process" in line]
