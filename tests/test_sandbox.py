"""The grading sandbox against hostile and broken notebooks: each runs through SandboxedExecute directly.

Each notebook is built here with nbformat and executed the way ``nbgrader
autograde`` executes a submission (the notebook's directory as the resources
path, inside a course directory); the test asserts what the kernel could and
could not do, and the one-line outcome recorded for the grading table.
Limits are short here (per-cell timeout 3 s, wall clock 6 s) to keep the file fast.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from autograder.sandbox.execute import SandboxedExecute, data_bytes, head, text_bytes
from autograder.sandbox.provisioner import (SandboxedKernelManager, SandboxError, check_sandbox, hidden_copies,
                                       reachable)
from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux-only")

AS_ROOT = os.geteuid() == 0
NOBODY = 65534


def notebook(*sources: str, kernelspec: str = "python3") -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell("# a submission")] + [new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": kernelspec, "display_name": kernelspec, "language": "python"}
    return nb


def run(nb, path=None, executor=None, kernel=None, **traits):
    """Execute ``nb`` in the sandbox as nbgrader would; returns ``(nb, seconds)``."""
    config = Config()
    for name, value in (kernel or {}).items():
        setattr(config.SandboxedKernelManager, name, value)
    executor = executor or SandboxedExecute(config=config, **{"timeout": 3, "wall_clock_limit": 30, **traits})
    resources = {"metadata": {"path": str(path or REPO)}, "nbgrader": {"student": "me", "assignment": "01_x"}}
    start = time.monotonic()
    nb, _ = executor.preprocess(nb, resources)
    nbformat.validate(nb)  # what the executor stored is a valid notebook (the notes, the trimmed outputs)
    return nb, time.monotonic() - start


def code(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def errors(cell) -> list[str]:
    return [o.ename for o in cell.outputs if o.output_type == "error"]


def execution(nb) -> dict:
    return nb.metadata["attention_lab"]["execution"]


def report(cell) -> dict:
    """The JSON a probing cell printed as its last line."""
    return json.loads(stdout(cell).strip().splitlines()[-1])


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


# ---- the sandbox still does its job --------------------------------------------------------------

def test_a_normal_notebook_runs_with_numpy_and_the_student_package():
    sockets_owner = {}

    def record_owner(notebook):
        ipc = executor.km.ipc_dir
        sockets_owner.update({p.name: p.stat().st_uid for p in ipc.iterdir() if p.is_socket()})

    executor = SandboxedExecute(timeout=10, wall_clock_limit=30, on_notebook_start=record_owner)
    nb, seconds = run(notebook(
        "import numpy as np\nfrom attention_lab import plots\nprint(np.arange(12.0).reshape(3, 4).sum(axis=1))",
        "import os\nprint(os.getuid(), os.getgid(), os.getcwd(), os.environ['HOME'], os.environ['NBGRADER_EXECUTION'])",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('/tmp/figure.png')\n"
        "print(os.path.getsize('/tmp/figure.png') > 0)",
    ), executor=executor)
    first, second, third = code(nb)
    assert stdout(first) == "[ 6. 22. 38.]\n"
    assert stdout(second).split() == [str(NOBODY), str(NOBODY), "/home/learner", "/tmp", "autograde"]
    assert stdout(third) == "True\n"
    assert not [o for cell in code(nb) for o in cell.outputs if o.output_type != "stream" or o.name != "stdout"]
    assert execution(nb) == {"status": "ok", "reason": "all cells ran"}
    if AS_ROOT:  # the kernel's sockets were made by an unprivileged uid on the host, too
        assert sockets_owner and set(sockets_owner.values()) == {NOBODY}
    print(f"normal notebook, 3 cells, kernel start included: {seconds:.1f} s")
    assert seconds < 15


@pytest.fixture(autouse=True)
def _nbgrader_execution(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # as nbgrader sets it around execution


# ---- what the kernel cannot see or touch ---------------------------------------------------------

@pytest.fixture
def course(tmp_path):
    """A course directory as nbgrader lays it out, with secrets the kernel must not reach."""
    root = tmp_path / "course"
    files = {
        "gradebook.db": b"SQLite format 3\x00 the grades of every student",
        "nbgrader_config.py": b"c = get_config()\n",
        "source/01_x/nb.ipynb": b'{"the": "solutions"}',
        "release/01_x/nb.ipynb": b'{"the": "release"}',
        "autograder/reference.py": b"def softmax(x): return 'the reference'\n",
        "submitted/other-student/01_x/nb.ipynb": b'{"another": "submission"}',
        "autograded/other-student/01_x/nb.ipynb": b'{"another": "graded submission"}',
        "autograded/me/01_x/support.txt": b"a file next to my notebook",
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root, files


def test_the_course_directory_and_the_repository_are_invisible(course):
    root, files = course
    reference_before = (REPO / "autograder/reference.py").read_bytes()
    here = root / "autograded/me/01_x"
    reads = [("read", str(root / name)) for name in files]
    reads += [("read", "../../../gradebook.db"), ("read", "../../gradebook.db"), ("list", str(root)),
              ("list", str(here)), ("read", "/etc/shadow"), ("read", os.path.expanduser("~/.bash_history")),
              ("read", str(REPO / "autograder/reference.py")), ("list", str(REPO / "source")),
              ("read", str(REPO / "nbgrader_config.py"))]
    writes = [("write", str(root / name)) for name in ("gradebook.db", "submitted/other-student/01_x/nb.ipynb",
                                                        "autograded/me/01_x/nb.ipynb", "new-file")]
    writes += [("write", str(REPO / "autograder/reference.py")), ("write", str(REPO / "gradebook.db"))]
    nb, _ = run(notebook(
        probing_cell(reads + writes),
        f"import os\nprint(os.path.exists({str(REPO)!r}), os.path.exists({os.path.expanduser('~')!r}))",
        f"open({str(REPO / 'attention_lab' / 'evil.py')!r}, 'w')",
    ), path=here)
    found = report(code(nb)[0])
    assert found, "the probing cell reported nothing"
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
    assert stdout(code(nb)[1]).split() == ["False", "False"]
    assert errors(code(nb)[2]) == ["FileNotFoundError"]
    # the grader still reads everything, unchanged, and nothing was added
    for name, content in files.items():
        assert (root / name).read_bytes() == content
    assert not (root / "new-file").exists() and not (REPO / "attention_lab" / "evil.py").exists()
    assert not (REPO / "gradebook.db").exists() or b"learner" not in (REPO / "gradebook.db").read_bytes()
    assert reference_before == (REPO / "autograder/reference.py").read_bytes()
    assert execution(nb)["status"] == "ok"


def test_proc_shows_neither_the_course_path_nor_the_host_user(course):
    import pwd

    root, _ = course
    user = pwd.getpwuid(os.geteuid())
    nb, _ = run(notebook(
        "import os\nprint(repr(open('/proc/self/mountinfo').read()))",
        "print(repr(os.readlink('/proc/self/cwd')), repr(os.getcwd()))",
        "print(repr(open('/proc/self/environ').read()))",
        "import attention_lab, sys\nprint(repr((attention_lab.__file__, sys.prefix, sys.base_prefix, sys.executable, sys.path)))",
        "print(repr(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libpython' in line})))",
    ), path=root / "autograded/me/01_x")
    shown = {name: stdout(cell) for name, cell in zip(("mountinfo", "cwd", "environ", "paths", "maps"), code(nb))}
    assert "/opt/venv" in shown["mountinfo"] and "/opt/packages" in shown["mountinfo"], shown["mountinfo"]
    secrets = {"the course directory": str(root), "the repository": str(REPO), "the user's home": user.pw_dir + "/",
               "the Python environment's host path": sys.prefix, "the interpreter's host path": sys.base_prefix}
    for where, text in shown.items():
        for what, secret in secrets.items():
            assert secret not in text, f"{where} shows {what} ({secret})"
        assert f"USER={user.pw_name}" not in text and f"LOGNAME={user.pw_name}" not in text
    assert shown["cwd"].split() == ["'/home/learner'", "'/home/learner'"]
    # the interpreter runs on its own libpython, not another build of the same version (Debian's under /usr)
    host_lib = sorted(Path(sys.base_prefix).glob("lib/libpython*.so*"))
    if host_lib and not _within_usr(Path(sys.base_prefix)):
        assert shown["maps"].strip() == repr([f"/opt/python/lib/{host_lib[0].resolve().name}"])


def _within_usr(path: Path) -> bool:
    return path == Path("/usr") or Path("/usr") in path.resolve().parents


def test_import_autograder_fails():
    nb, _ = run(notebook("import autograder", "from autograder import reference",
                         "import attention_lab, sys\nprint([p for p in sys.path if 'autograder' in p])"))
    first, second, third = code(nb)
    assert errors(first) == ["ModuleNotFoundError"] and errors(second) == ["ModuleNotFoundError"]
    assert stdout(third) == "[]\n"


def test_a_copy_of_autograder_in_a_bound_directory_is_masked(tmp_path, monkeypatch):
    # as after a non-editable install: autograder sits in a directory the kernel may read (site-packages)
    site = tmp_path / "site-packages"
    (site / "autograder").mkdir(parents=True)
    (site / "autograder" / "__init__.py").write_text("SECRET = 'the reference'\n")
    monkeypatch.syspath_prepend(str(site))
    assert hidden_copies("autograder", [site]) == [site / "autograder"]
    nb, _ = run(notebook(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport autograder",
                         f"print(open({str(site / 'autograder' / '__init__.py')!r}).read())"),
                kernel={"extra_read_only_paths": [str(site)]})
    first, second = code(nb)
    assert errors(first) == ["ImportError"] and "hides it" in first.outputs[-1].evalue
    assert "SECRET" not in stdout(second) and "ImportError" in stdout(second)


def test_no_network():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        nb, _ = run(notebook(f"""
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
}}))"""))
    finally:
        listener.close()
    found = report(code(nb)[0])
    assert found["grader's localhost"] == "ConnectionRefusedError:ECONNREFUSED"  # its own loopback: nobody listens
    assert found["internet"] == "OSError:ENETUNREACH" and found["dns"].startswith("gaierror")


# ---- runaway code --------------------------------------------------------------------------------

def test_an_infinite_loop_is_interrupted_and_the_rest_runs():
    nb, seconds = run(notebook("while True:\n    pass", "print('next cell')"), timeout=2)
    loop, after = code(nb)
    assert errors(loop)[0] in ("KeyboardInterrupt", "CellTimeoutError")
    assert stdout(after) == "next cell\n"
    assert execution(nb) == {"status": "ok", "reason": "all cells ran"}
    assert seconds < 12


def test_the_wall_clock_kills_a_loop_that_catches_keyboard_interrupt_and_grading_goes_on():
    executor = SandboxedExecute(timeout=2, wall_clock_limit=6)
    stubborn = notebook("import time\nwhile True:\n    try:\n        while True:\n            time.sleep(0.01)\n"
                        "    except KeyboardInterrupt:\n        print('interrupt ignored', flush=True)",
                        "print('never')", "print('never either')")
    nb, seconds = run(stubborn, executor=executor)
    assert "interrupt ignored" in stdout(code(nb)[0])  # the per-cell timeout did interrupt it, in vain
    assert execution(nb)["status"] == "killed"
    assert execution(nb)["reason"].startswith("the notebook ran longer than the wall-clock limit of 6 s")
    assert 6 <= seconds < 6 + 8  # kernel start, then the limit, then about a second to notice
    stopped_in = [i for i, cell in enumerate(code(nb)) if "KernelStopped" in errors(cell)]
    assert len(stopped_in) == 1 and all(not cell.outputs for cell in code(nb)[stopped_in[0] + 1:])
    assert not any("never" in stdout(cell) for cell in code(nb))
    # the same executor goes on with the next student's notebook
    nb, _ = run(notebook("print('next student')"), executor=executor)
    assert stdout(code(nb)[0]) == "next student\n" and execution(nb)["status"] == "ok"


def test_the_cpu_time_limit_stops_the_kernel():
    nb, _ = run(notebook("while True:\n    pass", "print('never')"), timeout=30, kernel={"cpu_time_limit": 3})
    assert execution(nb)["status"] == "killed"
    assert "CPU-time limit of 3 s" in execution(nb)["reason"]
    assert not code(nb)[1].outputs


# ---- memory, processes, files --------------------------------------------------------------------

def test_memory_bombs_end_in_memory_error_and_the_grader_survives():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    nb, _ = run(notebook("x = bytearray(8 * 2**30)",
                         "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))",
                         "del chunks\nprint('still here')"),
                timeout=20, kernel={"memory_limit": 2**30})
    one_go, growing, after = code(nb)
    assert errors(one_go) == ["MemoryError"]
    if execution(nb)["status"] == "ok":  # CPython raises MemoryError at the address-space limit ...
        assert errors(growing) == ["MemoryError"] and stdout(after) == "still here\n"
    else:  # ... or, if an allocation fails where it cannot, the kernel dies of it
        assert execution(nb)["status"] == "died" and "memory" in execution(nb)["reason"]
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown < 200, f"the grader's memory grew by {grown:.0f} MiB"


def test_limits_on_processes_files_and_scratch_space():
    nb, _ = run(notebook(
        "import os\ntry:\n    while True:\n        os.fork()\n"
        "except OSError as error:\n    failure = type(error).__name__",
        "import os\nprint(failure, len([p for p in os.listdir('/proc') if p.isdigit()]))",
        "try:\n    open('/tmp/big', 'wb').write(b'x' * 3 * 2**20)\nexcept OSError as error:\n    print(error.strerror)",
        "import os\nfor i in range(4):\n    try:\n        open(f'/home/learner/part{i}', 'wb').write(b'x' * 2**20)\n"
        "    except OSError as error:\n        print(i, error.strerror)",
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_AS))",
    ), timeout=10, kernel={"process_limit": 32, "file_size_limit": 2**20, "scratch_size": 3 * 2**20 // 2,
                           "memory_limit": 2**31})
    bomb, count, big_file, many_files, limits = code(nb)
    if AS_ROOT:  # RLIMIT_NPROC counts the kernel's own uid, which is only separate when the grader is root
        failure, processes = stdout(count).split()
        assert failure == "BlockingIOError" and int(processes) <= 32
    assert stdout(big_file) == "File too large\n"
    assert "No space left on device" in stdout(many_files)
    assert stdout(limits) == f"(0, 0) ({2**31}, {2**31})\n"


# ---- kernels that die ----------------------------------------------------------------------------

@pytest.mark.parametrize("source, status, words", [
    ("import os\nos._exit(0)", "died", "ended the kernel's process (exit code 0)"),
    ("import os\nos.kill(os.getpid(), 9)", "died", "killed (SIGKILL)"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", "died", "crashed (SIGSEGV)"),
    ("import os, threading, time\nthreading.Timer(0.3, os._exit, [3]).start()\ntime.sleep(5)", "died",
     "exit code 3"),
], ids=["os._exit", "kill -9", "segfault", "exit-from-a-thread"])
def test_a_kernel_that_dies_skips_the_rest_with_a_reason(source, status, words):
    nb, _ = run(notebook("print('before')", source, "print('after')", "1 + 1"))
    before, dying, *rest = code(nb)
    assert stdout(before) == "before\n"
    assert execution(nb)["status"] == status and words in execution(nb)["reason"]
    assert "in cell 3" in execution(nb)["reason"]  # cell 1 is markdown: numbers are the notebook's
    assert errors(dying) == ["KernelStopped"] and dying.outputs[-1].evalue == execution(nb)["reason"]
    assert all(not cell.outputs and cell.execution_count is None for cell in rest)


def test_sys_exit_is_an_error_but_the_kernel_lives():
    nb, _ = run(notebook("import sys\nsys.exit()", "raise SystemExit(3)", "print('after')"))
    first, second, after = code(nb)
    assert errors(first) == ["SystemExit"] and errors(second) == ["SystemExit"]
    assert stdout(after) == "after\n" and execution(nb)["status"] == "ok"


@pytest.mark.parametrize("kernelspec", ["bash", "a-kernel-that-does-not-exist"])
def test_the_notebook_kernelspec_is_ignored(kernelspec):
    nb, _ = run(notebook("import sys, os\nprint(sys.executable, os.getuid())", kernelspec=kernelspec))
    # the grader's own interpreter, at its neutral path inside the sandbox
    assert stdout(code(nb)[0]) == f"{SandboxedKernelManager().image().python} {NOBODY}\n"


# ---- output ------------------------------------------------------------------------------------

def test_printing_500_mb_keeps_only_the_cap_in_the_grader():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    nb, _ = run(notebook("import sys\nfor i in range(500):\n    sys.stdout.write('x' * 10**6)\n    sys.stdout.flush()",
                         "print('next cell')"), timeout=60, max_cell_output_bytes=2**20)
    flood, after = code(nb)
    assert sum(len(o.get("text", "")) for o in flood.outputs if "truncated" not in o.get("text", "")) == 2**20
    note = flood.outputs[-1].text
    dropped = int(note.split("output truncated: ")[1].split()[0])
    assert 400_000_000 < dropped <= 500 * 10**6 - 2**20
    assert stdout(after) == "next cell\n"
    assert execution(nb)["status"] == "ok" and "output truncated" in execution(nb)["reason"]
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown < 200, f"the grader's memory grew by {grown:.0f} MiB"


def test_one_message_over_the_size_cap_is_lost_and_the_next_cells_still_report():
    nb, _ = run(notebook("print('x' * 20_000_000)", "print('next cell')"), kernel={"max_message_bytes": 2**20},
                iopub_timeout=1)
    huge, after = code(nb)
    assert errors(huge) == ["OutputIncomplete"] and "larger than 1 MiB" in huge.outputs[-1].evalue
    assert stdout(after) == "next cell\n"
    assert "1 message(s) over 1 MiB lost" in execution(nb)["reason"]


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
    assert capped._dropped_bytes == 80


def test_the_notebook_cap_counts_across_cells_and_a_clear_gives_room_back(capped):
    cell0, cell1 = [], []
    capped.output(cell0, message("stream", name="stdout", text="a" * 100), None, 0)
    capped.output(cell1, message("stream", name="stdout", text="b" * 100), None, 1)
    assert cell1[0].text == "b" * 50 and capped._dropped_bytes == 50
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
    capped.output(outs, message("display_data", data={"application/vnd.attention-lab.probe+json": {"r": [1] * 100},
                                                      "text/plain": "results"}, metadata={}), None, 0)
    capped.output(outs, message("display_data", data={"image/png": "i" * 500}, metadata={}), None, 0)
    kinds = [(o.output_type, o.get("name")) for o in outs if "truncated" not in o.get("text", "")]
    assert ("stream", "stderr") in kinds  # present, even if empty: nbgrader scores any stderr as 0
    error = next(o for o in outs if o.output_type == "error")
    assert len(error.evalue) == 2000 and sum(map(len, error.traceback)) <= 20000 + 100
    value = next(o for o in outs if o.output_type == "execute_result")
    assert value.data == {"text/plain": "0.5"}  # the partial-credit value survives; the big HTML does not
    assert any("application/vnd.attention-lab.probe+json" in o.get("data", {}) for o in outs)
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


def test_sizes_and_heads():
    assert text_bytes("abc") == 3 and text_bytes("é") == 2
    assert head("éé", 3) == "é" and head("abcdef", 4) == "abcd"
    assert data_bytes(["ab", "c"]) == 3 and data_bytes({"a": 1}) == len('{"a": 1}')


# ---- configuration and set-up --------------------------------------------------------------------

def test_limits_come_from_config_and_the_command_is_a_whitelist(tmp_path):
    config = Config()
    config.SandboxedKernelManager.memory_limit = 3 * 2**30
    config.SandboxedKernelManager.cpu_time_limit = 77
    config.SandboxedExecute.wall_clock_limit = 42
    config.Execute.timeout = 7  # nbgrader_config.py sets Execute's options; the subclass follows them
    manager = SandboxedKernelManager(config=config)
    command, fds = manager.bwrap_command(["python", "-m", "ipykernel_launcher"], str(tmp_path))
    for fd in fds:
        os.close(fd)
    assert f"--as={3 * 2**30}" in command and "--cpu=77:82" in command and "--core=0" in command
    assert {"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--clearenv"} <= set(command)
    executor = SandboxedExecute(config=config)
    assert (executor.wall_clock_limit, executor.timeout, executor.interrupt_on_timeout) == (42, 7, True)
    bound = [command[i + 2] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    sources = [command[i + 1] for i, arg in enumerate(command) if arg in ("--ro-bind", "--bind")]
    assert not [path for path in bound + sources if str(REPO) in path], "the repository is bound"
    assert {"/opt/packages", "/opt/venv"} <= set(bound) and "/etc" not in bound
    with pytest.raises(SandboxError, match="holds the course directory"):
        SandboxedKernelManager(extra_read_only_paths=[str(tmp_path)]).bwrap_command(["python"], str(tmp_path / "a"))


def test_a_missing_bwrap_is_reported_with_how_to_install_it():
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        check_sandbox("bwrap-that-is-not-installed")
    assert check_sandbox().endswith("bwrap")


def test_only_a_sandboxed_kernel_manager_is_accepted():
    from jupyter_client.manager import AsyncKernelManager

    with pytest.raises(SandboxError, match="only runs kernels of a SandboxedKernelManager"):
        SandboxedExecute(kernel_manager_class=AsyncKernelManager).preprocess(notebook("1"), {})


def test_a_sandbox_that_cannot_start_is_an_error_of_the_machine_not_of_the_student():
    with pytest.raises(SandboxError, match="did not start.*No module named ipykernel_launcher"):
        run(notebook("1"), kernel={"python": "/usr/bin/python3"} if os.path.exists("/usr/bin/python3") else
            {"python": "/nonexistent"})


def test_reachable_follows_search_permissions(tmp_path):
    private = tmp_path / "private"
    (private / "inside").mkdir(parents=True)
    os.chmod(private, 0o700)
    assert not reachable(private / "inside", NOBODY)
    os.chmod(private, 0o711)
    assert reachable(private / "inside", NOBODY) == all(os.stat(p).st_mode & 0o001 for p in private.parents)


# ---- code after the last cell, in the same kernel (the grader's stand-in passes) ------------------------

PROBE_OUTPUT = ("from IPython.display import publish_display_data\n"
                "publish_display_data({'application/vnd.attention-lab.probe+json': {'grade_id': 'g', 'x': x}})")


def run_with_after_last_cell(nb, after_last_cell):
    from autograder.sandbox import AFTER_LAST_CELL

    executor = SandboxedExecute(timeout=5, wall_clock_limit=30)
    resources = {"metadata": {"path": str(REPO)}, "nbgrader": {"student": "me", "assignment": "01_x"},
                 AFTER_LAST_CELL: after_last_cell}
    nb, _ = executor.preprocess(nb, resources)
    nbformat.validate(nb)
    return nb


def test_code_after_the_last_cell_runs_in_the_same_kernel_and_only_its_grading_output_is_kept():
    seen = []

    def after_last_cell(nb, run_code):
        seen.append(len(nb.cells))
        seen.append(run_code("x += 1\nprint('STOLEN')\nshown.update('STOLEN')\n" + PROBE_OUTPUT))
        seen.append(run_code("import sys\nprint('STOLEN', file=sys.stderr)\n1 / 0"))

    nb = run_with_after_last_cell(notebook("x = 41", "from IPython.display import display\n"
                                                     "shown = display('as the cell left it', display_id=True)"),
                                  after_last_cell)
    cells, first, second = seen
    assert cells == len(nb.cells)  # the extra code is not stored in the notebook
    assert [o.data["application/vnd.attention-lab.probe+json"]["x"] for o in first] == [42]
    assert second == []
    assert "STOLEN" not in json.dumps(nb) and "as the cell left it" in json.dumps(nb)
    assert execution(nb) == {"status": "ok", "reason": "all cells ran"}


def test_a_kernel_that_dies_after_the_last_cell_keeps_the_cells_outputs_and_says_when():
    nb = run_with_after_last_cell(notebook("print('ran')"), lambda nb, run_code: run_code("import os\nos._exit(3)"))
    assert stdout(code(nb)[0]) == "ran\n"
    assert execution(nb)["status"] == "died" and "the grader's second pass" in execution(nb)["reason"]
