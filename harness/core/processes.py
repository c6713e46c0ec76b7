"""Which process owns a claim or a leftover: PID, boot id and start time from /proc (a PID alone is reused
after a reboot or in another PID namespace), and whether it still runs."""

from __future__ import annotations

import os

from harness.core.sysfs import Sysfs


def start_ticks(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat field 22); None if unknown."""
    stat = Sysfs().text(f"proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split() if stat is not None else []
    return fields[19] if len(fields) > 19 else None  # fields[0] is field 3, the state



def identity(pid: int | None = None) -> str:
    """The owner a claim names: `PID:BOOT_ID:START`, or the PID alone where /proc does not tell the rest."""
    pid = os.getpid() if pid is None else pid
    boot, start = Sysfs().text("proc/sys/kernel/random/boot_id"), start_ticks(pid)
    return f"{pid}:{boot}:{start}" if boot and start else str(pid)



def owner_alive(owner: str) -> bool:
    """Whether the process a claim names (`identity`) still runs: the same PID, boot and start time."""
    pid, _, rest = owner.partition(":")
    if not pid_alive(int(pid)):
        return False
    boot, _, start = rest.partition(":")
    return not rest or (boot == Sysfs().text("proc/sys/kernel/random/boot_id") and start == start_ticks(int(pid)))



def owner_pid(owner: str) -> int:
    return int(owner.partition(":")[0])



def pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, killed but not yet reaped, does not)."""
    stat = Sysfs().text(f"proc/{pid}/stat")
    if stat is not None:
        return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
