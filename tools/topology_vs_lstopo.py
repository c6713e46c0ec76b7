#!/usr/bin/env python3
"""The topology detector on this machine's live sysfs against hwloc's lstopo: same packages, NUMA nodes,
L3 domains and PCI functions (each with its class, ids, NUMA node and local CPUs)?

Runs `appliance topology detect` (the card map it would use, printed) and `lstopo-no-graphics --of xml`,
reads hwloc's XML with the appliance's reader, and lists every difference
(`harness.hw.topology.hwloc_xml.differences`, the comparison tests/test_topology_hwloc.py makes on the
fixtures). Prints the accelerators (display / processing-accelerator classes) as both tools see them.
Exit 0: they agree; 1: a difference (each printed); 2: no lstopo.

    python tools/topology_vs_lstopo.py
    LD_LIBRARY_PATH=/tmp/hwloc/usr/lib/x86_64-linux-gnu python tools/topology_vs_lstopo.py \\
        --lstopo /tmp/hwloc/usr/bin/lstopo-no-graphics --json /tmp/out/topology.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from harness.cli.main import main as appliance
from harness.core.sysfs import format_cpulist
from harness.hw.topology import detect
from harness.hw.topology.hwloc_xml import differences, lstopo_xml, read_hwloc_xml
from harness.hw.topology.model import PciDevice, Topology

ACCELERATOR_CLASSES = (0x03, 0x12)  # display controllers (GPUs: 0x0300 VGA, 0x0302 3D) and processing accelerators


def accelerators(t: Topology) -> list[dict[str, object]]:
    def row(d: PciDevice) -> dict[str, object]:
        return {"address": d.address, "class": f"0x{d.class_code:04x}", "vendor": f"0x{d.vendor:04x}",
                "device": f"0x{d.device:04x}", "numa_node": d.numa_node, "local_cpus": format_cpulist(d.local_cpus)}
    return [row(d) for d in t.pci_devices if d.class_code >> 8 in ACCELERATOR_CLASSES]


def describe(t: Topology) -> dict[str, object]:
    return {"packages": [format_cpulist(p) for p in t.packages],
            "numa_nodes": {str(n): format_cpulist(c) for n, c in sorted(t.numa_nodes.items())},
            "l3_domains": [format_cpulist(d) for d in t.l3_domains], "cores": len(t.cores),
            "pci_functions": len(t.pci_devices), "accelerators": accelerators(t)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lstopo", default=shutil.which("lstopo-no-graphics") or shutil.which("lstopo"),
                    help="hwloc's lstopo (default: on PATH), e.g. /tmp/hwloc/usr/bin/lstopo-no-graphics")
    ap.add_argument("--json", type=Path, default=None, help="also write both views and the differences here")
    args = ap.parse_args()
    print("appliance topology detect:", flush=True)
    if appliance(["topology", "detect"]) != 0:
        return 1
    ours = detect("/")
    if args.lstopo is None:
        print("lstopo: not found (apt-get install hwloc, or unpack its .debs and pass --lstopo)")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        theirs = read_hwloc_xml(lstopo_xml(Path(tmp) / "live.xml", args.lstopo))
    found = differences(ours, theirs)
    views = {"ours": describe(ours), "hwloc": describe(theirs), "differences": found, "lstopo": args.lstopo}
    for side in ("ours", "hwloc"):
        view = views[side]
        assert isinstance(view, dict)
        print(f"{side:5s}: packages {view['packages']}, NUMA {view['numa_nodes']}, L3 {view['l3_domains']}, "
              f"{view['cores']} cores, {view['pci_functions']} PCI functions")
        for acc in view["accelerators"]:
            print(f"       accelerator {acc['address']} class {acc['class']} {acc['vendor']}:{acc['device']} "
                  f"NUMA node {acc['numa_node']}, local CPUs {acc['local_cpus']}")
    print("\n".join(f"DIFFERENCE {line}" for line in found) or "agree: packages, NUMA nodes, L3 domains, PCI functions")
    if args.json is not None:
        args.json.write_text(json.dumps(views, indent=2))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
