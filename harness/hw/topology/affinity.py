"""The placement policy: which cores each card gets. One general algorithm, no per-chassis formulas.

Per NUMA node, with C local cards and D L3 domains (cores this process may use only):
  * C <= D: each card gets D // C whole L3 domains (cards never share an L3);
  * C > D:  each domain is split evenly between k = C // D cards, in order;
  * the C - k*D cards that cannot be placed evenly float over every allowed core, as do cards whose
    node is unknown or has no cores.
SMT siblings travel with their physical core. Cards keep PCI address order; emulated cards are
spread over the L3 domains in order (card i -> domain i*D_total // N) and take that domain's node.
"""

from __future__ import annotations

from harness.core.errors import ApplianceError
from harness.hw.topology.cards import FoundCard, find_cards
from harness.hw.topology.model import Card, CardMap, Core, Topology


def plan(topology: Topology, cards_spec: str = "auto") -> CardMap:
    """Place the cards that `cards_spec` names (auto | emulate:N) on `topology`'s allowed cores."""
    cores = _allowed_cores(topology)
    found = find_cards(topology, cards_spec)
    if len(found) > len(cores):
        raise ApplianceError(
            f"{len(found)} cards but only {len(cores)} physical cores are available; "
            f"use at most emulate:{len(cores)} or give the process more CPUs"
        )
    domains = _domains(topology, cores)
    nodes = _card_nodes(topology, found, domains)
    shares: dict[int, tuple[list[Core], tuple[int, ...]]] = {}
    for node in sorted({n for n in nodes if n is not None}):
        local = [i for i, n in enumerate(nodes) if n == node]
        node_domains = [d for d, (_, dn) in enumerate(domains) if dn == node]
        shares.update(_place(local, node_domains, domains))

    cards = []
    for i, card in enumerate(found):
        placed = shares.get(i)
        card_cores, l3 = placed if placed else (cores, ())
        cards.append(
            Card(
                index=i,
                pci=card.pci,
                vendor=card.vendor,
                model=card.model,
                numa_node=nodes[i],
                cores=tuple(c.first for c in card_cores),
                cpus=tuple(sorted(cpu for c in card_cores for cpu in c.cpus)),
                l3=l3,
                floating=placed is None,
                device_nodes=card.device_nodes,
                runtime=card.runtime,
                ordinal=card.ordinal,
            )
        )
    return CardMap(topology.packages, dict(topology.numa_nodes), topology.l3_domains, tuple(cards))


def _allowed_cores(topology: Topology) -> list[Core]:
    """Physical cores with at least one allowed thread, restricted to their allowed threads."""
    cores = []
    for core in topology.cores:
        threads = tuple(cpu for cpu in core.cpus if cpu in topology.allowed)
        if threads:
            cores.append(Core(core.package, threads))
    return cores


def _domains(topology: Topology, cores: list[Core]) -> list[tuple[list[Core], int | None]]:
    """Each cache domain's allowed cores (in CPU order) and the NUMA node holding them."""
    result = []
    for domain in topology.cache_domains():
        members = [c for c in cores if c.first in domain]
        result.append((members, topology.node_of(members[0].first) if members else None))
    return result


def _card_nodes(
    topology: Topology, found: list[FoundCard], domains: list[tuple[list[Core], int | None]]
) -> list[int | None]:
    """The node of each card: from PCI locality, or for emulated cards from the domain it is spread to."""
    usable = [node for members, node in domains if members]
    nodes = []
    for i, card in enumerate(found):
        if card.pci is None and usable:
            nodes.append(usable[i * len(usable) // len(found)])
        else:
            nodes.append(card.numa_node if card.numa_node in topology.numa_nodes else None)
    return nodes


def _place(
    cards: list[int], node_domains: list[int], domains: list[tuple[list[Core], int | None]]
) -> dict[int, tuple[list[Core], tuple[int, ...]]]:
    """Cores for the cards of one node (indices into the card list); cards left out float."""
    node_domains = [d for d in node_domains if domains[d][0]]
    if not cards or not node_domains:
        return {}
    if len(cards) <= len(node_domains):
        per = len(node_domains) // len(cards)
        return {
            card: (
                [core for d in node_domains[j * per : (j + 1) * per] for core in domains[d][0]],
                tuple(node_domains[j * per : (j + 1) * per]),
            )
            for j, card in enumerate(cards)
        }
    per_domain = len(cards) // len(node_domains)
    shares: dict[int, tuple[list[Core], tuple[int, ...]]] = {}
    queue = iter(cards)
    for d in node_domains:
        members = domains[d][0]
        k = min(per_domain, len(members))
        size = len(members) // k
        for j in range(k):
            shares[next(queue)] = (members[j * size : (j + 1) * size], (d,))
    return shares
