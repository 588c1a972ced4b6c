"""A PostgreSQL server for the tests (standard library only).

:func:`postgres_server` yields a SQLAlchemy URL for a real PostgreSQL server on loopback:

1. ``CHUNKWISE_TEST_POSTGRES_URL`` when it is set (CI sets it; so can a developer with a server of
   their own), used as is;
2. otherwise a throwaway cluster: ``initdb`` and ``pg_ctl`` are looked up on ``PATH``, then in
   ``/usr/lib/postgresql/*/bin`` (Debian, Ubuntu) and ``/usr/pgsql-*/bin`` (RHEL), newest version
   first; the cluster lives in a temporary directory, trusts connections from 127.0.0.1, listens
   only there on a free port, and gets a database ``chunkwise_test``. It is stopped and its
   directory deleted when the ``with`` block ends.

When neither is possible it raises :class:`PostgresUnavailable`, whose message says what is
missing; the pytest fixture turns that into a skip.

initdb refuses to run as root, so under root the server's commands run as the ``postgres`` OS user
(created by Debian's and RHEL's packages), which then owns the temporary directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV_VAR = "CHUNKWISE_TEST_POSTGRES_URL"
DATABASE = "chunkwise_test"
SUPERUSER = "postgres"
OS_USER = "postgres"  # who runs the server when the tests run as root

_TOOLS = ("initdb", "pg_ctl", "createdb")
_NOT_FOUND = f"PostgreSQL not found: set {ENV_VAR} or install postgresql (initdb, pg_ctl)"


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be had; ``str(exc)`` says why."""


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a ``postgresql+psycopg://`` URL; see the module docstring."""
    url = os.environ.get(ENV_VAR)
    if url:
        yield url
        return
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(_NOT_FOUND)
    with _throwaway_cluster(bindir) as port:
        yield f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"


def find_bindir() -> Path | None:
    """The first directory holding ``initdb``, ``pg_ctl`` and ``createdb``, or None.

    ``PATH`` first (symbolic links resolved, so ``/usr/local/bin/initdb`` pointing into
    ``/usr/lib/postgresql/15/bin`` finds its siblings there), then the distributions' versioned
    directories, newest version first.
    """
    candidates: list[Path] = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    versioned = glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin")
    candidates += sorted((Path(p) for p in versioned), key=_version, reverse=True)
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in _TOOLS):
            return bindir
    return None


def _version(bindir: Path) -> tuple[int, ...]:
    """(15,) for /usr/lib/postgresql/15/bin, (9, 6) for .../9.6/bin, () when there is no number."""
    match = re.search(r"(\d+(?:\.\d+)*)", bindir.parent.name)
    return tuple(int(n) for n in match.group(1).split(".")) if match else ()


@contextlib.contextmanager
def _throwaway_cluster(bindir: Path) -> Iterator[int]:
    """Start a cluster from ``bindir`` in a temporary directory; yield its port; stop and delete it."""
    as_user = _server_user()
    # PG* variables (PGDATA, PGHOST, PGPORT, ...) from the developer's shell must not redirect us.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    root = Path(tempfile.mkdtemp(prefix="chunkwise-pg-"))
    data, log = root / "data", root / "server.log"
    try:
        if as_user is not None:
            os.chown(root, as_user.pw_uid, as_user.pw_gid)
        _run(as_user, env, root, [
            bindir / "initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
            "--no-locale", "--no-sync",
        ])
        for _attempt in range(3):  # another process may take the free port before the server does
            port = _free_port()
            _write_settings(data / "postgresql.conf", port, socket_dir=root)
            result = _run(as_user, env, root, [
                bindir / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "start",
            ], check=False)
            if result.returncode == 0:
                break
        else:
            raise PostgresUnavailable(
                f"could not start PostgreSQL from {bindir}: {_tail(log) or result.stderr.strip()}"
            )
        _run(None, env, root, [
            bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", SUPERUSER, DATABASE,
        ])
        yield port
    finally:
        if (data / "postmaster.pid").exists():
            # Immediate: the cluster is thrown away, so there is nothing to checkpoint.
            _run(as_user, env, root, [bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                 check=False)
        shutil.rmtree(root, ignore_errors=True)


def _server_user() -> pwd.struct_passwd | None:
    """The OS user to run initdb and pg_ctl as: None for ourselves, ``postgres`` under root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root and there is no {OS_USER!r} OS user to run initdb as "
            f"(initdb refuses root): set {ENV_VAR} or install postgresql"
        ) from None


def _run(
    as_user: pwd.struct_passwd | None, env: dict[str, str], cwd: Path, cmd: list[object], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (as ``as_user`` when given); on failure with ``check``, PostgresUnavailable."""
    args = [str(a) for a in cmd]
    if as_user is not None:
        env = {**env, "HOME": as_user.pw_dir, "USER": as_user.pw_name, "LOGNAME": as_user.pw_name}
    result = subprocess.run(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        user=as_user.pw_uid if as_user else None,
        group=as_user.pw_gid if as_user else None,
        extra_groups=[] if as_user else None,
    )
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise PostgresUnavailable(f"{Path(args[0]).name} failed (exit {result.returncode}): {detail}")
    return result


def _write_settings(conf: Path, port: int, socket_dir: Path) -> None:
    """Append the server settings (later lines win, so a retry with a new port just appends again)."""
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(socket_dir),
        # A throwaway cluster: durability buys nothing and costs time.
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    with conf.open("a", encoding="utf-8") as f:
        f.write("\n# chunkwise test cluster\n")
        for key, value in settings.items():
            f.write(f"{key} = '{value}'\n")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
