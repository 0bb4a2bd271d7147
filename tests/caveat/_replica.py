"""A streaming replica of an embedded PostgreSQL, for the read-replica figure (issue 14).

``streaming_replica(primary_url)`` checks the primary's WAL settings for streaming,
makes a standby with ``pg_basebackup -R`` (the binaries of the embedded server, as
``caveat.backup`` finds ``pg_dump``), starts it on a socket directory of its own, and
stops and deletes it afterwards. As root the embedded server runs as the OS user
``pgserver``; the standby's directory is given to that user and its programs run as it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from caveat import db
from caveat.backup import pg_tool

#: The OS user the embedded server runs postgres as when started by root.
_PG_USER = "pgserver" if os.geteuid() == 0 else None


@dataclass
class Standby:
    """A running standby: its owner URL (``postgres`` on its own socket) and replay
    control, for the harness (the application logs in as ``caveat_app``)."""

    url: str
    primary_url: str

    def _one(self, url: str, sql: str) -> object:
        engine = db.make_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                return conn.execute(sa.text(sql)).scalar()
        finally:
            engine.dispose()

    def pause(self) -> None:
        """Stop replaying WAL (it is still received): from now on the standby is stale."""
        self._one(self.url, "SELECT pg_wal_replay_pause()")
        deadline = time.monotonic() + 10
        while self._one(self.url, "SELECT pg_get_wal_replay_pause_state()") != "paused":
            if time.monotonic() > deadline:
                raise AssertionError("the standby did not pause its replay")
            time.sleep(0.01)

    def resume(self) -> None:
        """Replay again."""
        self._one(self.url, "SELECT pg_wal_replay_resume()")

    def catch_up(self, timeout: float = 30.0) -> None:
        """Wait until the standby has replayed everything the primary has written now."""
        target = self._one(self.primary_url, "SELECT CAST(pg_current_wal_insert_lsn() AS text)")
        deadline = time.monotonic() + timeout
        while not self._one(
            self.url, f"SELECT pg_last_wal_replay_lsn() >= CAST('{target}' AS pg_lsn)"
        ):
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not replay up to {target}")
            time.sleep(0.01)


def check_streaming_settings(primary_url: str) -> dict[str, str]:
    """The primary's settings that streaming needs, asserted: WAL at ``replica`` level or
    above, WAL senders, and a ``replication`` entry for the local socket in pg_hba."""
    engine = db.make_engine(primary_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            got = {
                name: str(conn.execute(sa.text(f"SHOW {name}")).scalar())
                for name in ("wal_level", "max_wal_senders", "hot_standby")
            }
            local_replication = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_hba_file_rules WHERE type = 'local' "
                    "AND 'replication' = ANY(database) AND error IS NULL"
                )
            ).scalar()
    finally:
        engine.dispose()
    assert got["wal_level"] in ("replica", "logical"), got
    assert int(got["max_wal_senders"]) > 0, got
    assert got["hot_standby"] == "on", got
    assert local_replication, "no pg_hba entry lets replication in over the local socket"
    return got


def _run(program: str, *args: str) -> None:
    done = subprocess.run(
        [str(pg_tool(program)), *args],
        user=_PG_USER,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"{program} failed: {done.stderr.strip()}")


@contextmanager
def streaming_replica(primary_url: str) -> Iterator[Standby]:
    """A standby of the server at ``primary_url`` (an embedded one: its socket directory
    is in the URL), streaming from it; stopped and deleted on exit."""
    check_streaming_settings(primary_url)
    socket_dir = make_url(primary_url).query["host"]
    assert isinstance(socket_dir, str)
    tmp = Path(tempfile.mkdtemp(prefix="caveat-replica-"))
    data, sock = tmp / "data", tmp / "sock"
    sock.mkdir()
    tmp.chmod(0o755)
    sock.chmod(0o777)
    if _PG_USER is not None:
        entry = pwd.getpwnam(_PG_USER)
        os.chown(tmp, entry.pw_uid, entry.pw_gid)
    started = False
    try:
        # -R writes standby.signal and primary_conninfo; -X stream takes the WAL along
        _run("pg_basebackup", "-D", str(data), "-R", "-X", "stream", "-c", "fast",
             "-h", socket_dir, "-U", "postgres")  # fmt: skip
        _run("pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(tmp / "log"),
             "-o", f"-h '' -k {sock}", "start")  # fmt: skip
        started = True
        yield Standby(f"postgresql+psycopg://postgres@/postgres?host={sock}", primary_url)
    finally:
        if started:
            _stop(data)
        shutil.rmtree(tmp, ignore_errors=True)


def _stop(data: Path) -> None:
    """A fast shutdown; the postmaster killed if it does not go within 30 s."""
    try:
        _run("pg_ctl", "-D", str(data), "-w", "-t", "30", "-m", "fast", "stop")
    except (AssertionError, subprocess.TimeoutExpired):
        pid_file = data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, signal.SIGKILL)
