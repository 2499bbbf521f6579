"""``make lite``: the course as a static JupyterLite site in ``dist/lite/`` — zero install, runs in the browser.

``python -m autograder.lite_build [TARGET]`` builds, with ``jupyter lite build``
(jupyterlite-core and the Pyodide kernel, ``jupyterlite-pyodide-kernel``), a
folder that any static web host can serve. It holds

* JupyterLab and the Notebook app, the Pyodide kernel and the ipywidgets
  frontend (the lab extensions of this environment; nbgrader's are switched off
  in ``lite/jupyter-lite.json``: nbgrader needs a Jupyter server);
* the contents: ``notebooks/`` (the start page and the explorers), ``release/``
  and a copy of it as ``workspace/`` (the start page links there, as under
  ``make lab``); edits are kept in the browser's storage;
* ``static/pyodide/``: Pyodide's core from the npm registry (the ``pyodide``
  package, at the version the kernel declares) and its ``pyodide-lock.json``,
  rewritten so that everything the kernel needs to start is served by the site
  itself: the pure-Python wheels it loads (micropip, packaging, IPython and its
  dependencies, jedi, comm), downloaded from PyPI, and the course's own
  pure-Python wheels (the student package ``attention-lab-student`` as
  ``make student-env`` builds it — never the grader —, ipywidgets and
  jupyterlab_widgets at the versions of this environment, whose lab extension
  the site ships), and ``attention-lab-reference``: the reference
  implementations the self-study explorers in ``notebooks/`` run on
  (each graded assignment's ``autograder/assignments/aNN_*/reference.py`` and
  ``autograder/assignments/validation.py``, nothing else of the grader). Like this repository, the site therefore holds the solutions:
  it is for self-study, not for students of a graded class (give those the
  student edition). Pyodide builds the rest for WebAssembly itself (NumPy,
  matplotlib, Pillow, …): neither the npm package nor PyPI has those wheels, so
  the lock points them at Pyodide's CDN and the browser downloads them on first
  use (then caches them).

The build needs the npm registry and PyPI on its first run only (both cached
in ``build/lite-cache/``). Everything is pinned: the Pyodide version by the
kernel, the PyPI wheels by the versions in Pyodide's lock or this environment.
"""

from __future__ import annotations

import email.parser
import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import nbformat
from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL, PYODIDE_PYTHON_VERSION, PYODIDE_VERSION
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from autograder.course import REPO

DEFAULT_TARGET = REPO / "dist" / "lite"
CACHE = REPO / "build" / "lite-cache"
CONFIG = REPO / "lite"  # committed site configuration: jupyter-lite.json

# what the Pyodide kernel installs while it starts (jupyterlite-pyodide-kernel's worker: micropip, then
# piplite.install of these); ipykernel and pyodide-kernel come with the kernel's own wheels
KERNEL_STARTUP = ("micropip", "comm", "jedi", "ipython")
# the wheels the kernel extension ships itself (its static/pypi/): not put in the lock
KERNEL_WHEELS = ("ipykernel", "pyodide-kernel", "piplite")
# pure-Python packages of this environment the course needs in the browser, at this environment's versions
# (ipywidgets must match the jupyterlab_widgets lab extension the site ships)
ENVIRONMENT_WHEELS = ("ipywidgets", "jupyterlab-widgets", "comm")
# requirements of the student package that are server-side tools, not used in the browser
SERVER_ONLY = ("jupyterlab", "nbgrader", "ipykernel")
STUDENT_PACKAGE = "attention-lab-student"
# the reference the self-study explorers import (`from autograder.assignments.a01_attention.reference import ...`):
# these modules only (paths under autograder/), with each graded assignment's (a folder with a spec.py) reference
REFERENCE_PACKAGE = "attention-lab-reference"
REFERENCE_MODULES = ("__init__.py", "assignments/validation.py")
REFERENCE_PER_ASSIGNMENT = ("__init__.py", "reference.py")
# modules a reference imports beside it: assignment 9's reference runs its model (model.py: the weights' loader and
# the forward pass, which the tiny-GPT explorer runs in the browser)
REFERENCE_EXTRA = {"a09_tiny_gpt": ("model.py",)}
# the wheel's autograder/assignments/__init__.py: the real one discovers the specs, which are grader, not reference
REFERENCE_ASSIGNMENTS_INIT = '"""The course\'s reference implementations, one folder per assignment (no specs: not the grader)."""\n'
# the kernel jupyterlite-pyodide-kernel registers (jupyter-lite.json's defaultKernelName)
PYODIDE_KERNELSPEC = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}


def wheel_metadata(wheel: Path) -> email.message.Message:
    """The METADATA of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def wheel_imports(wheel: Path) -> list[str]:
    """Top-level importable names in a wheel (packages and modules), as Pyodide's lock lists them."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {n.split("/")[0] for n in names if "/" in n and n.split("/")[1] == "__init__.py"}
    tops |= {n[:-3] for n in names if "/" not in n and n.endswith(".py")}
    tops |= {n.split("/")[0] for n in names if n.endswith(".py") and "/" in n
             and not n.split("/")[0].endswith((".dist-info", ".data"))}
    return sorted(tops)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def runtime_requirements(metadata: email.message.Message) -> list[str]:
    """Canonical names of a wheel's unconditional requirements (no extras, no environment markers)."""
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    return sorted({canonicalize_name(r.name) for r in requirements if r.marker is None})


def pyodide_core(cache: Path) -> Path:
    """Pyodide's core (the npm package ``pyodide`` at the kernel's version), unpacked; downloaded once."""
    unpacked = cache / f"pyodide-{PYODIDE_VERSION}"
    if not (unpacked / "pyodide-lock.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", str(cache), "--silent"],
                       check=True, capture_output=True, text=True)
        with tarfile.open(cache / f"pyodide-{PYODIDE_VERSION}.tgz") as archive:
            members = archive.getmembers()
            unsafe = [m.name for m in members if not (m.isfile() or m.isdir()) or ".." in Path(m.name).parts
                      or not m.name.startswith("package/")]
            if unsafe:  # (Python < 3.11.4 has no extraction filter to refuse these)
                raise RuntimeError(f"unexpected entries in the pyodide npm package: {unsafe[:5]}")
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(cache / "npm", members=members, **safe)
        shutil.rmtree(unpacked, ignore_errors=True)
        (cache / "npm" / "package").rename(unpacked)
    return unpacked


def download_wheels(pins: list[str], cache: Path) -> dict[str, Path]:
    """Pure-Python wheels for ``name==version`` pins from PyPI (for Pyodide's Python), cached; by canonical name."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)

    def cached(pin):
        name, version = pin.split("==")
        stem = f"{canonicalize_name(name).replace('-', '_')}-{version}-"
        return next((w for w in wheels.glob("*-none-any.whl") if w.name.lower().startswith(stem.lower())), None)

    missing = [pin for pin in pins if cached(pin) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--python-version", PYODIDE_PYTHON_VERSION, "--platform", "any", "--dest", str(wheels), *missing], check=True)
    found = {canonicalize_name(pin.split("==")[0]): cached(pin) for pin in pins}
    not_found = [pin for pin, wheel in zip(pins, found.values()) if wheel is None]
    if not_found:
        raise RuntimeError(f"no pure-Python wheel on PyPI for {not_found}")
    return found


def student_wheel(out: Path) -> Path:
    """The student package as a pure-Python wheel, built from the student edition (no grader in it)."""
    from autograder import student_build

    shutil.rmtree(out, ignore_errors=True)  # one wheel: the current one
    with tempfile.TemporaryDirectory() as tmp:
        edition = student_build.build(Path(tmp) / "attention-lab-student")
        # no build isolation: setuptools comes with the `lite` extra, so building needs no index
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "-w", str(out), str(edition)], check=True)
    return next(out.glob("attention_lab_student-*-py3-none-any.whl"))


def reference_wheel(out: Path) -> Path:
    """The reference implementations as a pure-Python wheel (package ``autograder`` with :data:`REFERENCE_MODULES`)."""
    from autograder.student_build import pyproject_toml

    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "attention-lab-reference"
        package = project / "autograder"
        sources = REPO / "autograder"
        modules = list(REFERENCE_MODULES) + [
            f"assignments/{spec.parent.name}/{name}"
            for spec in sorted((sources / "assignments").glob("a*/spec.py"))
            for name in REFERENCE_PER_ASSIGNMENT + REFERENCE_EXTRA.get(spec.parent.name, ())]
        for module in modules:
            (package / module).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(sources / module, package / module)
        (package / "assignments" / "__init__.py").write_text(REFERENCE_ASSIGNMENTS_INIT)
        (project / "pyproject.toml").write_text(pyproject_toml(
            REFERENCE_PACKAGE, "Attention Lab's reference implementations, which the self-study explorers run on.",
            ["numpy>=1.26,<3"], "autograder"))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "-w", str(out), str(project)], check=True)
    return next(out.glob("attention_lab_reference-*-py3-none-any.whl"))


def lock_entry(wheel: Path, depends: list[str]) -> dict:
    metadata = wheel_metadata(wheel)
    return {"name": metadata["Name"], "version": metadata["Version"], "file_name": wheel.name,
            "install_dir": "site", "sha256": sha256(wheel), "package_type": "package",
            "imports": wheel_imports(wheel), "depends": depends, "unvendored_tests": False}


def closure(packages: dict, names) -> set[str]:
    """``names`` and everything they depend on in the lock."""
    seen, todo = set(), [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [canonicalize_name(d) for d in packages[name]["depends"]]
    return seen


def localised_lock(core: Path, pyodide_dir: Path, cache: Path) -> dict:
    """Pyodide's lock with the course's and the kernel's pure-Python wheels in ``pyodide_dir``, the rest on the CDN.

    Returns
    -------
    dict
        The lock; the wheels it names locally are copied into ``pyodide_dir``.

    Raises
    ------
    RuntimeError
        If a package needed in the browser is neither in Pyodide's lock nor a known pure-Python wheel.
    """
    lock = json.loads((core / "pyodide-lock.json").read_text())
    packages = {canonicalize_name(k): v for k, v in lock["packages"].items()}

    # the course's own wheels: the student package, and pure-Python packages at this environment's versions
    extra = download_wheels([f"{n}=={importlib.metadata.version(n)}" for n in ENVIRONMENT_WHEELS], cache)
    extra[canonicalize_name(STUDENT_PACKAGE)] = student_wheel(cache / "student")
    extra[canonicalize_name(REFERENCE_PACKAGE)] = reference_wheel(cache / "reference")
    shim = Path(sys.prefix, "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension/static/pypi")
    extra["widgetsnbextension"] = max(shim.glob("widgetsnbextension-4.*-py3-none-any.whl"))  # the kernel's stand-in
    for name, wheel in extra.items():
        requirements = [r for r in runtime_requirements(wheel_metadata(wheel)) if r not in SERVER_ONLY]
        unknown = [r for r in requirements if r not in packages and r not in extra]
        if unknown:
            raise RuntimeError(f"{wheel.name} needs {unknown}, which the browser kernel would not find")
        packages[name] = lock_entry(wheel, requirements)

    # what the kernel loads to start, and what the course's wheels need: pure-Python ones are served locally
    needed = closure(packages, [*KERNEL_STARTUP, *extra])
    pure_pins = [f"{packages[n]['name']}=={packages[n]['version']}" for n in sorted(needed - set(extra))
                 if packages[n]["file_name"].endswith("-none-any.whl")]
    local = {**download_wheels(pure_pins, cache), **extra}
    for name, wheel in local.items():
        shutil.copy2(wheel, pyodide_dir / wheel.name)
        packages[name].update(file_name=wheel.name, sha256=sha256(wheel))
    for entry in packages.values():
        if not (pyodide_dir / entry["file_name"]).exists():  # built for WebAssembly by Pyodide: from its CDN
            entry["file_name"] = f"{PYODIDE_CDN_URL}/{entry['file_name']}"
    lock["packages"] = dict(sorted(packages.items()))
    return lock


def stage(staging: Path, cache: Path) -> Path:
    """The JupyterLite project folder: configuration, contents and Pyodide with its rewritten lock."""
    if staging.exists():
        shutil.rmtree(staging)
    pyodide_dir = staging / "static" / "pyodide"
    pyodide_dir.mkdir(parents=True)
    core = pyodide_core(cache)
    for name in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide.js",
                 "package.json"):
        shutil.copy2(core / name, pyodide_dir / name)
    lock = localised_lock(core, pyodide_dir, cache)
    (pyodide_dir / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    shutil.copy2(CONFIG / "jupyter-lite.json", staging / "jupyter-lite.json")
    contents = staging / "contents"
    for folder, source in (("notebooks", "notebooks"), ("release", "release"), ("workspace", "release")):
        # workspace/: where the start page's links lead, as under `make lab`
        shutil.copytree(REPO / source, contents / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for notebook in contents.rglob("*.ipynb"):
        use_browser_kernel(notebook)
    return staging


def use_browser_kernel(path: Path) -> None:
    """Point a notebook at the Pyodide kernel, so that JupyterLite starts it without asking.

    The committed notebooks name the ``python3`` kernel, which JupyterLite does not have; only their
    ``metadata.kernelspec`` changes.
    """
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    notebook.metadata["kernelspec"] = dict(PYODIDE_KERNELSPEC)
    nbformat.write(notebook, path)


def build(target: Path = DEFAULT_TARGET, cache: Path = CACHE) -> Path:
    """Build the JupyterLite site into ``target`` (replacing it).

    Parameters
    ----------
    target : Path
        Output folder, ready for any static host.
    cache : Path
        Where the npm package and the PyPI wheels are kept between builds.

    Returns
    -------
    Path
        ``target``.

    Raises
    ------
    subprocess.CalledProcessError
        If npm, pip or ``jupyter lite build`` fail (for example without access to the npm registry or PyPI
        on a first build).
    """
    staging = stage(REPO / "build" / "lite", cache)
    if target.exists():
        shutil.rmtree(target)
    jupyter = Path(sys.executable).parent / "jupyter"
    subprocess.run([str(jupyter), "lite", "build", "--lite-dir", str(staging), "--output-dir", str(target),
                    "--contents", str(staging / "contents"), "--no-sourcemaps", "--log-level=WARN"],
                   check=True, cwd=staging)
    return target


def main(argv: list[str] | None = None) -> int:
    from autograder.student_build import build_command

    return build_command(argv, "Build the course as a static JupyterLite site.", DEFAULT_TARGET, build,
                         lambda path: " (for self-study: it holds the reference solutions the explorers run on)\n"
                                      f"  serve it with any static web server, e.g. python -m http.server -d {path}")


if __name__ == "__main__":
    sys.exit(main())
