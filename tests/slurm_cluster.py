"""A real SLURM on this machine for the fleet tests: munged with a key and socket of its own, slurmctld and one
slurmd per node name (Debian's slurm-wlm runs several on one host when each has its own NodeName, -N and Port),
configured in a temporary folder; every daemon stopped by its own PID at the end."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def missing() -> str | None:
    """Why the cluster cannot start here, or None."""
    absent = [b for b in BINARIES if shutil.which(b) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: apt-get install slurm-wlm munge; .ci/run does)"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


CONF = """ClusterName=fleettest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
KillWait=10
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
{overrides}{nodes}
PartitionName=fleet Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    def __init__(self, root: Path, nodes: list[str]) -> None:
        self.root, self.nodes = root, nodes
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
        self.pids: list[int] = []

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=check, timeout=60)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-3000:]}" for p in sorted((self.root / "log").glob("*")))

    def wait_until(self, what: str, ready, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
        """Poll `ready()` (a state, not a time verdict) until it holds; the deadline only ends a hung cluster."""
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"SLURM: {what} not reached in {timeout} s\n{self.logs()}")
            time.sleep(0.5)

    def jobs(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i %t %N").stdout.split("\n")[:-1]


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def cluster(root: Path, nodes: list[str], cpus: int | None = None) -> Iterator[Cluster]:
    """The cluster; `cpus` declares that many CPUs per node (more than the machine's: slurmd's config_overrides),
    so that many one-CPU jobs share a node (a rehearsal's side-by-side runs of simulated cards)."""
    for sub in ("munge", "state", "log", *(f"spool/{n}" for n in nodes)):
        (root / sub).mkdir(parents=True)
    c = Cluster(root, nodes)
    ports = _free_ports(1 + len(nodes))
    lines = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs={cpus or os.cpu_count()} "
                      f"State=UNKNOWN" for n, p in zip(nodes, ports[1:], strict=True))
    (root / "slurm.conf").write_text(CONF.format(ctld_port=ports[0], root=root, nodes=lines, names=",".join(nodes),
                                                   overrides="SlurmdParameters=config_overrides\n" if cpus else ""))
    munge = root / "munge"
    pidfiles = [munge / "pid", root / "slurmctld.pid", *(root / f"slurmd-{n}.pid" for n in nodes)]
    try:
        c.run("mungekey", "-c", "-k", str(munge / "key"))
        c.run("munged", f"--key-file={munge / 'key'}", f"--socket={munge / 'sock'}", f"--pid-file={munge / 'pid'}",
              f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={munge / 'seed'}", "--force")
        c.run("slurmctld", "-f", str(root / "slurm.conf"))
        for n in nodes:
            c.run("slurmd", "-f", str(root / "slurm.conf"), "-N", n)
        c.wait_until("every node idle", lambda: sorted(
            c.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")[:-1]) == sorted(f"{n} idle" for n in nodes))
        yield c
    finally:
        for path in reversed(pidfiles):  # slurmd, slurmctld, then munged: each by the PID it wrote
            pid = _pid(path)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                for _ in range(100):
                    try:
                        os.kill(pid, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.1)
