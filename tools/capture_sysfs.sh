#!/usr/bin/env bash
# Capture this machine's topology files (what harness/hw/topology/detect.py and hwloc's lstopo read below a
# sysfs root, nothing else) into tests/sysfs_captures/NAME.tar.xz, a fixture the topology tests run the detector
# and lstopo on (tests/test_topology_captures.py). Run it on each new kind of machine and commit the tarball:
#
#   tools/capture_sysfs.sh [NAME]     NAME: the CPU, e.g. amd-epyc-genoa-2vcpu (default: lscpu's model name,
#                                     lowercased, and the CPU count, e.g. amd-epyc-2cpu)
#
# Files: cpu/{online,possible,present,offline,kernel_max}, cpu*/online, cpu*/topology/*, cpu*/cache/index*/
# (level, type, size, id, shared_cpu_list/map, line size, ways, sets), node/{online,possible,has_*},
# node*/{cpulist,cpumap,distance}, /proc/cpuinfo, and for every PCI function and the bridges above it: ids,
# class, revision, numa_node, local_cpus/local_cpulist, the first 64 bytes of config (hwloc reads the bridge
# buses there), accel/drm/nvidia device names. No memory sizes, no serial numbers, no cgroup of this process.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
if [ -z "$name" ]; then
  model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  name="$(echo "$model" | tr 'A-Z' 'a-z' | sed 's/([^)]*)//g; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')-$(nproc --all)cpu"
fi
case "$name" in *[!a-z0-9-]*|"") echo "capture_sysfs: NAME must be lowercase letters, digits and dashes" >&2; exit 2 ;; esac
dest=tests/sysfs_captures/$name.tar.xz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/$name

put() {  # put SRC: copy one readable file to the same path below $root (sysfs sizes lie: read it with cat)
  [ -r "$1" ] && [ -f "$1" ] || return 0
  mkdir -p "$root$(dirname "$1")"
  cat "$1" > "$root$1" 2>/dev/null || rm -f "$root$1"
}

cpu=/sys/devices/system/cpu
for f in online possible present offline kernel_max; do put $cpu/$f; done
for d in $cpu/cpu[0-9]*; do
  put "$d/online"
  for f in "$d"/topology/*; do put "$f"; done
  for c in "$d"/cache/index*; do
    for f in level type size id shared_cpu_list shared_cpu_map coherency_line_size ways_of_associativity \
             number_of_sets physical_line_partition; do put "$c/$f"; done
  done
done
node=/sys/devices/system/node
for f in online possible has_cpu has_memory has_normal_memory; do put $node/$f; done
for d in $node/node[0-9]*; do
  for f in cpulist cpumap distance; do put "$d/$f"; done
done
put /proc/cpuinfo

mkdir -p "$root/sys/bus/pci/devices"
for link in /sys/bus/pci/devices/*; do
  [ -e "$link" ] || continue
  dev=$(readlink -f "$link")
  d=$dev
  while [ "$d" != /sys/devices ] && [ "$d" != / ]; do  # the function and the bridges above it
    for f in vendor device class subsystem_vendor subsystem_device revision numa_node local_cpus local_cpulist; do
      put "$d/$f"
    done
    if [ -r "$d/config" ] && [ ! -e "$root$d/config" ]; then
      mkdir -p "$root$d" && head -c 64 "$d/config" > "$root$d/config"
    fi
    d=$(dirname "$d")
  done
  for sub in accel drm nvidia; do
    [ -d "$dev/$sub" ] || continue
    for n in "$dev/$sub"/*; do mkdir -p "$root$dev/$sub/$(basename "$n")"; done
  done
  ln -s "$(realpath --relative-to="$root/sys/bus/pci/devices" "$root$dev")" "$root/sys/bus/pci/devices/$(basename "$link")"
done

{
  echo "$name: captured $(date -u +%Y-%m-%d) by tools/capture_sysfs.sh"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p'), $(nproc --all) CPUs"
  echo "kernel: $(uname -r)"
} > "$root/CAPTURE"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tmp" -cJf "$dest" "$name"
echo "$dest: $(tar -tJf "$dest" | wc -l) entries, $(stat -c %s "$dest") bytes"
