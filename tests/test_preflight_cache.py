"""The kernel preflight runs once per kernel configuration and process (issue 14), and again when any input changes.

No kernel starts here: :func:`preflight.kernel_problem` is replaced by a counter, and the test checks which calls
of :func:`preflight.require_probe_kernel_once` reach it. A check that would now fail must never be skipped
because an earlier, differently configured one passed: each input of :func:`preflight.preflight_key` that can
make it fail is changed once, and the check must run again.
"""

import sys

import pytest

from autograder.nbgrader import grading, preflight
from autograder.nbgrader.preflight import GradingStopped
from conftest import REPO


@pytest.fixture
def checks(monkeypatch):
    """Course directories the (counted, kernel-less) preflight checked, in order; an empty cache to start."""
    checked = []
    monkeypatch.setattr(preflight, "_passed", set())
    monkeypatch.setattr(preflight, "kernel_problem", lambda course_dir: checked.append(course_dir) or None)
    return checked


def course(tmp_path, name, extra=""):
    target = grading.copy_course(REPO, tmp_path / name, folders=())
    if extra:
        with open(target / "nbgrader_config.py", "a") as config:
            config.write(extra)
    return target


def test_a_passed_check_is_not_repeated_for_another_course_configured_alike(tmp_path, checks):
    first, second = course(tmp_path, "first"), course(tmp_path, "second")
    for course_dir in (first, second, first):
        preflight.require_probe_kernel_once(course_dir)
    assert checks == [first], "the second course starts the same kernel: checked once"


def test_a_failed_check_is_not_remembered(tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "_passed", set())
    checked = []
    monkeypatch.setattr(preflight, "kernel_problem", lambda course_dir: checked.append(course_dir) or "no numpy")
    target = course(tmp_path, "broken")
    for _ in range(2):
        with pytest.raises(GradingStopped, match="no numpy"):
            preflight.require_probe_kernel_once(target)
    assert len(checked) == 2


def test_a_changed_configuration_checks_again(tmp_path, checks):
    plain = course(tmp_path, "plain")
    preflight.require_probe_kernel_once(plain)
    limited = course(tmp_path, "limited", "\nc.SandboxedKernelManager.memory_limit = 2**30\n")
    preflight.require_probe_kernel_once(limited)
    preflight.require_probe_kernel_once(limited)
    assert checks == [plain, limited]


def test_a_changed_student_package_checks_again(tmp_path, checks, monkeypatch):
    packages = tmp_path / "packages"
    (packages / "lab_pkg").mkdir(parents=True)
    (packages / "lab_pkg" / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(packages))
    target = course(tmp_path, "course", "\nc.SandboxedKernelManager.student_packages = ['lab_pkg']\n")
    preflight.require_probe_kernel_once(target)
    preflight.require_probe_kernel_once(target)
    (packages / "lab_pkg" / "__init__.py").write_text("raise ImportError('broken')\n")
    preflight.require_probe_kernel_once(target)
    assert checks == [target, target], "the copy each kernel gets changed: checked again"


def test_a_course_inside_a_bound_directory_checks_again(tmp_path, checks):
    outside = course(tmp_path, "outside")
    preflight.require_probe_kernel_once(outside)
    inside = course(tmp_path / "shown", "inside", f"\nc.SandboxedKernelManager.extra_read_only_paths = "
                                                  f"[{str(tmp_path / 'shown')!r}]\n")
    exposed = course(tmp_path / "shown", "also_inside", f"\nc.SandboxedKernelManager.extra_read_only_paths = "
                                                        f"[{str(tmp_path / 'shown')!r}]\n")
    elsewhere = course(tmp_path, "elsewhere", f"\nc.SandboxedKernelManager.extra_read_only_paths = "
                                              f"[{str(tmp_path / 'shown')!r}]\n")
    for course_dir in (inside, exposed, elsewhere):
        preflight.require_probe_kernel_once(course_dir)
    assert checks == [outside, inside, elsewhere], (
        "a course under a bound path (its sandbox refuses to start) is not one outside it")


def test_another_interpreter_or_path_checks_again(tmp_path, checks, monkeypatch):
    target = course(tmp_path, "course")
    preflight.require_probe_kernel_once(target)
    monkeypatch.setenv("PATH", f"{tmp_path}:{sys.exec_prefix}/bin:/usr/bin:/bin")  # where bwrap is looked up
    preflight.require_probe_kernel_once(target)
    other = course(tmp_path, "other", f"\nc.SandboxedKernelManager.python = {sys.executable + '-other'!r}\n")
    preflight.require_probe_kernel_once(other)  # a Python that does not run: no key, so always checked
    preflight.require_probe_kernel_once(other)
    assert checks == [target, target, other, other]


# ---- remembered in the course directory: a later run (another process) skips a check that passed there --------

def a_new_process(monkeypatch) -> None:
    """What a new `python -m autograder grade` process starts with: nothing passed in this process."""
    monkeypatch.setattr(preflight, "_passed", set())


def test_a_passed_check_is_remembered_in_the_course_directory_for_the_next_run(tmp_path, checks, monkeypatch):
    target = course(tmp_path, "course")
    preflight.require_probe_kernel_once(target)
    digest = preflight.key_digest(preflight.preflight_key(target))
    assert preflight.passed_digests(target) == [digest]
    a_new_process(monkeypatch)
    preflight.require_probe_kernel_once(target)
    assert checks == [target], "the next run in the same course starts no preflight kernel"
    a_new_process(monkeypatch)  # the next run with another configuration checks, and keeps both digests
    with open(target / "nbgrader_config.py", "a") as config:
        config.write("\nc.SandboxedKernelManager.memory_limit = 2**30\n")
    preflight.require_probe_kernel_once(target)
    assert checks == [target, target]
    assert preflight.passed_digests(target)[0] == digest and len(preflight.passed_digests(target)) == 2


def test_a_failed_check_writes_nothing_and_the_next_run_checks_again(tmp_path, monkeypatch):
    checked = []
    monkeypatch.setattr(preflight, "kernel_problem", lambda course_dir: checked.append(course_dir) or "no numpy")
    target = course(tmp_path, "broken")
    for _ in range(2):
        a_new_process(monkeypatch)
        with pytest.raises(GradingStopped, match="no numpy"):
            preflight.require_probe_kernel_once(target)
    assert len(checked) == 2 and not (target / preflight.PASSED_NAME).exists()


def test_another_course_s_record_or_an_unreadable_one_is_no_shortcut(tmp_path, checks, monkeypatch):
    first = course(tmp_path, "first")
    preflight.require_probe_kernel_once(first)
    other = course(tmp_path, "other", "\nc.SandboxedKernelManager.memory_limit = 2**30\n")
    (other / preflight.PASSED_NAME).write_bytes((first / preflight.PASSED_NAME).read_bytes())  # copied with the course
    a_new_process(monkeypatch)
    preflight.require_probe_kernel_once(other)
    assert checks == [first, other], "a digest of another configuration does not pass this one"
    for broken in ("not json", '{"passed": "abc"}', "[1, 2]", '{"passed": [1, null]}'):
        (first / preflight.PASSED_NAME).write_text(broken)
        a_new_process(monkeypatch)
        preflight.require_probe_kernel_once(first)
    assert checks == [first, other, first, first, first, first]
    assert preflight.passed_digests(first) == [preflight.key_digest(preflight.preflight_key(first))]


def test_the_record_keeps_the_newest_digests_only(tmp_path, monkeypatch):
    target = tmp_path / "course"
    target.mkdir()
    for number in range(preflight.PASSED_KEPT + 5):
        preflight.remember_passed(target, f"digest-{number}")
    kept = preflight.passed_digests(target)
    assert kept == [f"digest-{n}" for n in range(5, preflight.PASSED_KEPT + 5)]
    preflight.remember_passed(target, "digest-7")  # passed again: moved to the newest end, not kept twice
    assert preflight.passed_digests(target)[-1] == "digest-7" and preflight.passed_digests(target).count("digest-7") == 1
