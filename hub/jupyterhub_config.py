"""JupyterHub for one Attention Lab class on one machine (`make hub`; see autograder/hub/__init__.py).

Read by `jupyterhub -f hub/jupyterhub_config.py`, which `python -m autograder hub start` runs as
root with ATTENTION_LAB_HUB_SETTINGS naming the settings.json that set-up wrote. Every server is
a Unix user's own process (LocalProcessSpawner): the instructor's runs the course repository's
environment (Formgrader, Create Assignment, the sandboxed grader) in the course directory; the
students' run student-env/ (the student edition, Assignment List and Validate only) in their homes.

For real use, replace the two marked sections: the authenticator (e.g. PAM, OAuth or LTI from your
LMS) and, for more than one machine, the spawner (Zero to JupyterHub's KubeSpawner with an image of
the student edition; the exchange then needs a volume shared by all pods). See README.md.
"""

import json
import os
from pathlib import Path

from attention_lab.core import KERNEL_ENVIRONMENT

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

settings = json.loads(Path(os.environ["ATTENTION_LAB_HUB_SETTINGS"]).read_text())
state = Path(settings["state"])
instructor = settings["instructor"]

# ---- network and the hub's own files: loopback only; ports come from the command line ----
c.JupyterHub.bind_url = "http://127.0.0.1:8000"  # loopback; `autograder.hub start` gives the port
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")

# ---- authentication: FOR TRYING IT ONLY (one shared password for all students) ----
# Real use: c.JupyterHub.authenticator_class = "pam" (Unix passwords), an OAuthenticator, or
# ltiauthenticator for an LMS; keep allowed_users / admin_users (or the LMS's roles).
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = settings["passwords"]["students"]
c.SharedPasswordAuthenticator.admin_password = settings["passwords"]["instructor"]
c.Authenticator.allowed_users = set(settings["students"])
c.Authenticator.admin_users = {instructor}

# ---- spawner: each user's server as that Unix user ----
# Real use on several machines: Zero to JupyterHub (KubeSpawner), singleuser.image = the student
# edition (`make student-env`) for students and this repository's environment for instructors.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 300  # a busy 2-core machine starts a JupyterLab server slowly
c.Spawner.http_timeout = 300
# Everything a server writes is private unless nbgrader's exchange opens it on purpose.
c.LocalProcessSpawner.popen_kwargs = {"umask": settings["umask"]}
c.Spawner.environment = {**KERNEL_ENVIRONMENT, "LANG": "C.UTF-8"}


def environment_for(spawner):
    """The instructor's server: the course repository's environment, rooted at the course directory.
    A student's: the students' environment, rooted at the home folder (where assignments are fetched)."""
    if spawner.user.name == instructor:
        prefix, spawner.notebook_dir = Path(settings["instructor_env"]), settings["course"]
    else:
        prefix = Path(settings["student_env"])
    spawner.cmd = [str(prefix / "bin" / "jupyterhub-singleuser")]
    # nbgrader shells out to alembic and starts python3 kernels: this environment's bin/ comes first
    spawner.environment = {**spawner.environment, "PATH": f"{prefix / 'bin'}:/usr/local/bin:/usr/bin:/bin"}


c.Spawner.pre_spawn_hook = environment_for
