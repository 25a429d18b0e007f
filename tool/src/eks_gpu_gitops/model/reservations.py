"""How a node group buys its instances: a capacity reservation it targets, a Capacity Block, or Spot, as eksctl
v0.230.0 reads them (pkg/apis/eksctl.io/v1alpha5/types.go CapacityReservation, InstanceMarketOptions)."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import mapping
from .nodes import NodeGroup


@dataclass
class Purchase:
    reservation: dict  # capacityReservation, {} when absent
    reservation_id: str
    resource_group: str
    block: bool  # instanceMarketOptions.marketType capacity-block
    spot: bool

    @property
    def targeted(self) -> bool:
        """Whether the group launches into one reservation (or a resource group of them): its zone is theirs."""
        return bool(self.reservation_id or self.resource_group)

    @classmethod
    def of(cls, group: NodeGroup) -> Purchase:
        reservation = mapping(group.doc, "capacityReservation")
        target = mapping(reservation, "capacityReservationTarget")
        return cls(
            reservation,
            str(target.get("capacityReservationID", "") or ""),
            str(target.get("capacityReservationResourceGroupARN", "") or ""),
            mapping(group.doc, "instanceMarketOptions").get("marketType") == "capacity-block",
            group.doc.get("spot") is True,
        )
