"""Set-up files agree with each other and with the README; nbgrader's config loads; extensions are enabled."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from traitlets.config.loader import PyFileConfigLoader

from conftest import REPO


def requirement(spec: str) -> tuple[str, str]:
    name, bounds = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec).groups()
    return name.lower().replace("_", "-"), ",".join(sorted(b.strip() for b in bounds.split(",") if b.strip()))


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = [spec for group in project["optional-dependencies"].values() for spec in group]
    pyproject = dict(requirement(s) for s in project["dependencies"] + extras)
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = [d for d in env["dependencies"] if isinstance(d, dict)]
    assert "python=3.11" in conda and "pip" in conda
    assert pip == [{"pip": ["-e ."]}]
    listed = dict(requirement(s) for s in conda if not s.startswith(("python=", "pip")) and s != "pip")
    assert listed == pyproject, "environment.yml and pyproject.toml disagree on packages or version bounds"


def test_requirement_parser_notices_a_changed_bound():
    assert requirement("numpy>=1.26,<3") == ("numpy", "<3,>=1.26")
    assert requirement("numpy >=1.26, <3") == requirement("numpy<3,>=1.26")
    assert requirement("numpy>=1.26,<2") != requirement("numpy>=1.26,<3")


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    test_command = re.search(r"^## .*[Tt]est.*?```(?:bash|sh)?\n(.*?)\n```", readme, re.S | re.M).group(1).strip()
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.strip().startswith(("#", "set ", "cd ", "apt-get", "if ", "fi", "export "))]
    assert ci_lines[-1] == test_command


def test_readme_has_a_section_for_each_audience_and_the_quick_start():
    readme = (REPO / "README.md").read_text()
    headings = re.findall(r"^#+ (.+)$", readme, re.M)
    for audience in ("Students", "Instructors", "Self-study"):
        assert any(audience.lower() in h.lower() for h in headings), audience
    for command in ("make demo", "make test", "make lab", "make release", "make grade"):
        assert command in readme


def test_makefile_targets_set_up_and_export_the_environment():
    makefile = (REPO / "Makefile").read_text()
    for target in ("lab", "test", "release", "grade", "demo"):
        assert re.search(rf"^{target}: \$\(STAMP\)", makefile, re.M), target
    assert "export PATH := $(BIN):$(PATH)" in makefile
    assert "export OPENBLAS_NUM_THREADS := 1" in makefile


def test_gitignore_keeps_course_state_out():
    ignored = (REPO / ".gitignore").read_text().split()
    for entry in ("gradebook.db", "submitted/", "autograded/", "feedback/", ".ipynb_checkpoints/", ".venv/"):
        assert entry in ignored


def test_nbgrader_config_loads_with_our_settings():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    preprocessors = config.GenerateAssignment.preprocessors
    assert preprocessors[-1].__name__ == "ClearWidgetState"
    assert [p.__name__ for p in preprocessors].count("ClearSolutions") == 1
    assert config.Execute.timeout == 30
    assert config.OverwriteCells.add_missing_cells is True
    assert config.CourseDirectory.course_id == "attention-lab"
    assert config.Validator.validate_all is True
    assert config.Autograde.sanitize_preprocessors[-1].__name__ == "ClearWidgetState"


def jupyter(*args):
    bin_dir = Path(sys.executable).parent
    return subprocess.run([str(bin_dir / "jupyter"), *args], capture_output=True, text=True, check=True)


def test_jupyterlab_has_working_nbgrader_and_widget_extensions():
    result = jupyter("labextension", "list")
    listing = result.stdout + result.stderr
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next((l for l in listing.splitlines() if extension in l), "")
        assert "enabled" in line and "OK" in line, f"{extension}: {line!r}\n{listing}"
    server = jupyter("server", "extension", "list")
    assert re.search(r"nbgrader\.server_extensions\.\w+ .*OK", server.stdout + server.stderr)
