"""Run a call in a child process whose address space is limited, as the grading sandbox limits the kernel's.

A hidden case may be sized so that a wrong way of computing cannot fit in the sandbox
(:attr:`autograder.grader.spec.Case.memory_limit`: assignment 7's T = 20 000, whose T × T float64
score matrix needs 3.2 GB of the kernel's 2 GiB). In the learner's sandboxed kernel the limit is the
kernel's own (``prlimit --as``). Outside it — the grader computing what a known mistake gives on the
case, the in-process model of grading running an answer — the call runs here instead: in a forked
child whose RLIMIT_AS is what the child already maps plus the limit, so that the same allocation
fails with the same MemoryError and the grader's own process never allocates the matrix.

Only trusted code (the reference, the bank's answers, the in-process model's answers) runs through
this module; a learner's code never runs in the grader.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import time
from typing import Any, Callable

#: What the child may take beyond its own limit to start and to send its result (its stack, pickling).
_HEADROOM = 64 * 2**20


class ChildFailed(RuntimeError):
    """The child process died or overran its time without sending a result (the message says which)."""


def mapped_bytes() -> int:
    """Bytes of address space this process maps now (``VmSize`` of ``/proc/self/status``), 0 where unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_with_memory_limit(thunk: Callable[[], Any], limit_bytes: int, seconds: float) -> Any:
    """``thunk()`` in a forked child with ``limit_bytes`` of address space beyond what it maps already.

    Parameters
    ----------
    thunk : callable
        Called without arguments in the child; what it returns must pickle. It should catch the
        exceptions it means to report (a MemoryError it catches is a result like any other); one it
        does not catch is raised again here as :class:`ChildFailed`.
    limit_bytes : int
        Address space the call may add, bytes, ≥ 1 (the sandbox's ``memory_limit``).
    seconds : float
        Wall-clock time the child gets, > 0; it is killed after that.

    Returns
    -------
    object
        What ``thunk`` returned.

    Raises
    ------
    ValueError
        If ``limit_bytes`` or ``seconds`` is not positive.
    ChildFailed
        If the child raised, was killed by a signal, or did not finish within ``seconds``.
    """
    if not isinstance(limit_bytes, int) or isinstance(limit_bytes, bool) or limit_bytes < 1:
        raise ValueError(f"limit_bytes must be an integer >= 1; received {limit_bytes!r}")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0; received {seconds!r}")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: limit, call, send, and leave without running the parent's clean-up
        os.close(read_end)
        status = 0
        try:
            limit = mapped_bytes() + limit_bytes + _HEADROOM
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard),
                                                    hard))
            try:
                payload = pickle.dumps(("returned", thunk()))
            except BaseException as error:  # noqa: BLE001 — reported to the parent, which raises ChildFailed
                payload = pickle.dumps(("raised", f"{type(error).__name__}: {error}"[:500]))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise ChildFailed(f"the call did not finish within {seconds:g} s")
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise ChildFailed(f"the child process was killed by signal {os.WTERMSIG(status)}")
    if not chunks:
        raise ChildFailed("the child process sent no result")
    outcome, value = pickle.loads(b"".join(chunks))
    if outcome == "raised":
        raise ChildFailed(f"the call raised in the child process: {value}")
    return value


def reachable_code(namespace: dict, name: str, opaque=()) -> bytes | None:
    """What a call of ``namespace[name]`` can run: the code of that function and of every name it reaches.

    Follows the global names each function's code uses (also in nested functions), recursively: functions by
    their compiled code and defaults, modules by name, numbers and strings by value. A call on a memory-limited
    case takes seconds; its result depends only on this and on its inputs, so the grader caches such results by
    it (two answers that differ only in a function the call never reaches — another step's — share one run), and
    the in-process model every result (:func:`autograder.grader.in_process.kernel_results`).

    Parameters
    ----------
    namespace : dict
        The answer's global namespace.
    name : str
        The function the case calls.
    opaque : iterable of str
        Names whose values the call never uses as they are (a stand-in pass's earlier functions, which the probe
        answers without calling them, :func:`autograder.grader.in_process.kernel_results`): each counts by its name
        only, and the names it reaches are not followed through it.

    Returns
    -------
    bytes or None
        A digest of that code, or None when the call can reach something this cannot describe (a class, an
        object): such a result is not cached.
    """
    import hashlib
    import marshal
    import types

    parts, seen, stack, opaque = [], set(), [name], set(opaque) - {name}
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        if current in opaque:
            seen.add(current)
            parts.append((current, "opaque"))
            continue
        if current not in namespace:
            continue  # a builtin, or a name the call never finds (it raises NameError either way)
        seen.add(current)
        value = namespace[current]
        if isinstance(value, types.FunctionType):
            codes, names = [value.__code__], set()
            while codes:
                code = codes.pop()
                names.update(code.co_names)
                codes.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
            try:
                parts.append((current, marshal.dumps(value.__code__), repr(value.__defaults__), repr(value.__kwdefaults__)))
            except ValueError:
                return None
            stack.extend(sorted(names))
        elif isinstance(value, types.ModuleType):
            parts.append((current, value.__name__))
        elif isinstance(value, (bool, int, float, str, type(None))):
            parts.append((current, repr(value)))
        else:
            return None
    return hashlib.sha256(repr(sorted(parts)).encode()).digest()
