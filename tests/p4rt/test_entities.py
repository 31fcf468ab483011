"""The replication engine's entities encode to P4Runtime and back unchanged."""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from innet.p4rt import encode
from innet.p4rt.entities import CloneSession, MulticastGroup, Replica


def test_a_multicast_group_round_trips_with_its_replicas_sorted() -> None:
    group = MulticastGroup(7, (Replica(3), Replica(1, 2)))
    ent = encode.replication_entity(group)
    assert ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id == 7
    assert encode.replication_from_proto(ent) == MulticastGroup(7, (Replica(1, 2), Replica(3)))


def test_a_clone_session_round_trips() -> None:
    session = CloneSession(100, (Replica(255),), class_of_service=1, packet_length_bytes=64)
    assert encode.replication_from_proto(encode.replication_entity(session)) == session


def test_a_replication_update_carries_its_kind() -> None:
    up = encode.replication_update("delete", MulticastGroup(1))
    assert up.type == p4runtime_pb2.Update.DELETE
    assert up.entity.packet_replication_engine_entry.HasField("multicast_group_entry")
