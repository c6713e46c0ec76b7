"""Machine topology and the card-to-core map: `detect()` reads the machine, `plan()` places the cards."""

from harness.topology.detect import detect
from harness.topology.model import Core, PciDevice, Topology

__all__ = ["Core", "PciDevice", "Topology", "detect"]
