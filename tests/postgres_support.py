"""A throwaway PostgreSQL server for tests: Debian's ``postgresql`` package, run as the postgres user.

:func:`postgres_server` makes a data directory in a fresh temporary folder owned by postgres, starts the server
on 127.0.0.1 at a free port with password authentication (scram-sha-256, the password in a ``PGPASSFILE`` so
that no ``db_url`` carries it), yields a :class:`Server`, and stops it and removes the folder afterwards.
``.ci/run`` installs the package; in CI a missing server fails the test, elsewhere it is skipped.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


@dataclass
class Server:
    """A running server: where it listens and the password file that lets clients in."""

    port: int
    passfile: Path
    user: str = "postgres"

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` (no password: libpq reads it from ``PGPASSFILE``)."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"


def require_postgres() -> Path:
    """The newest installed server's ``bin/``; skips the test without one, fails it under CI=true."""
    if not BINARIES:
        message = "PostgreSQL is not installed (Debian's postgresql package; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Path(BINARIES[-1])


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_postgres(*command: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["runuser", "-u", "postgres", "--", *command], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed as postgres:\n{done.stdout}\n{done.stderr}")
    return done


@contextlib.contextmanager
def postgres_server(databases: tuple[str, ...] = ()):
    """Start a private PostgreSQL server with ``databases`` created; stop it and remove its files on exit."""
    bin_dir = require_postgres()
    folder = Path(tempfile.mkdtemp(prefix="attention-lab-postgres-"))
    shutil.chown(folder, "postgres", "postgres")
    data, password = folder / "data", secrets.token_hex(16)
    (folder / "password").write_text(password + "\n")
    shutil.chown(folder / "password", "postgres", "postgres")
    port = _free_port()
    passfile = Path(tempfile.mkdtemp(prefix="attention-lab-pgpass-")) / "pgpass"
    passfile.write_text(f"127.0.0.1:{port}:*:postgres:{password}\n")
    passfile.chmod(0o600)
    started = False
    try:
        _as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=scram-sha-256",
                     f"--pwfile={folder / 'password'}", "--no-sync")
        _as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "120",
                     "-o", f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off", "start")
        started = True
        env = {**os.environ, "PGPASSFILE": str(passfile)}
        for database in databases:
            subprocess.run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                            database], env=env, check=True, capture_output=True, timeout=120)
        yield Server(port, passfile)
    finally:
        if started:
            _as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(passfile.parent, ignore_errors=True)
