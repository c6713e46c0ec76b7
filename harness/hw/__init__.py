"""The machine: topology (NUMA, L3, PCI cards) from sysfs or hwloc XML, NVIDIA GPUs by bus id, host facts,
RAPL energy, whether the CPU computes bf16. Imports only harness.core."""
