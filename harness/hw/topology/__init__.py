"""Machine topology and the card-to-core map.

`detect()` reads the machine (sysfs or hwloc XML), `plan()` places the cards on its cores, and
`load_card_map()` reads a saved map back, checked against the machine.
"""

from harness.hw.topology.affinity import plan
from harness.hw.topology.detect import detect
from harness.hw.topology.formats import load_card_map
from harness.hw.topology.model import Card, CardMap, Core, PciDevice, Topology

__all__ = ["Card", "CardMap", "Core", "PciDevice", "Topology", "detect", "load_card_map", "plan"]
