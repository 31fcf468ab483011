"""innet.p4 by name: every table, action, counter and register the Python side refers to.

The one place these names are written down; the P4 side is p4src/innet.p4 (routing, ECN,
port counters) and p4src/aggregate.p4 (aggregation, fault injection). A test checks each
name against the committed P4Info and BMv2 JSON. `describe` writes innet's entries the way
deploy, status and the error messages show them.
"""

from __future__ import annotations

from innet.aggpacket import DEFAULT_JOB_SLOTS, VECTOR_LEN
from innet.p4rt.entities import Entry, describe_entry
from innet.p4rt.schema import int_to_ip, int_to_mac
from innet.shipped import p4src_dir

# the committed program: the installed package's copy, else the clone's p4src/
P4SRC = p4src_dir()
P4INFO_PATH = P4SRC / "innet.p4info.txtpb"
BMV2_JSON_PATH = P4SRC / "innet.json"

# tables and their actions
T_ROUTES, A_FORWARD = "ipv4_lpm", "ipv4_forward"
A_MULTICAST = "ipv4_multicast"  # a job's RESULT group address: replicate (group = job)
A_DROP_PACKET = "drop"  # ipv4_lpm's default: no route
T_AGG, A_AGGREGATE, A_TRACK = "agg_job", "aggregate", "track"  # blue, red switches
T_ECN, A_ECN_ON, A_ECN_OFF = "ecn_config", "set_ecn_threshold", "ecn_off"
T_FAULT, A_DROP, A_NO_FAULT = "agg_fault", "drop_share", "no_fault"
MANAGED_TABLES = (T_ROUTES, T_AGG)    # the controller owns every entry of these
DEFAULT_TABLES = (T_ECN, T_FAULT)     # the controller sets their default action
DROP_SCALE = 1 << 16  # agg_fault's share: drop when random(0..65535) < share

# actions the data plane calls itself (no table entry names them)
A_STORE_VECTOR, A_ADD_VECTOR, A_LOAD_VECTOR = "store_vector", "add_vector", "load_vector"
A_ADD_VECTOR_EMIT = "add_vector_emit"  # the contribution that completes the chunk
A_DROP_AS, A_SEND_SUMS = "drop_as", "send_sums"

# counters
C_PORT_IN, C_PORT_OUT = "port_in", "port_out"  # per port, packets and bytes
C_ECN_MARKED = "ecn_marked"                    # per egress port, packets marked CE
C_AGG_FIRST = "agg_first"    # per egress port, a chunk's first transmissions (aggregation)
C_AGG_REPEAT = "agg_repeat"  # per egress port, its retransmissions
C_AGG_EVENTS = "agg_events"  # per event (innet.aggpacket.EVENT_NAMES)
# what status reads
COUNTERS = (C_PORT_IN, C_PORT_OUT, C_ECN_MARKED, C_AGG_FIRST, C_AGG_REPEAT, C_AGG_EVENTS)

# registers: per aggregation slot (slot-major, innet.plan.registers)
R_AGG_OWNER, R_AGG_CHUNK, R_AGG_BITMAP = "agg_owner", "agg_chunk", "agg_bitmap"
R_AGG_COUNT, R_AGG_FLAGS = "agg_count", "agg_flags"
# the cell's 32 sums: one array per element, indexed by the cell (no address arithmetic)
R_AGG_VALUES = tuple(f"agg_v{i}" for i in range(VECTOR_LEN))
# the egress side's first-transmission tracking (agg_first / agg_repeat)
R_SENT_OWNER, R_SENT_CHUNK = "agg_sent_owner", "agg_sent_chunk"
R_SENT_BITMAP = "agg_sent_bitmap"
# the scoped repair of a lost RESULT at a blue switch: the chunk asked for, who asked
R_ASK_CHUNK, R_ASKERS = "agg_ask_chunk", "agg_askers"
REGISTERS = (R_AGG_OWNER, R_AGG_CHUNK, R_AGG_BITMAP, R_AGG_COUNT, R_AGG_FLAGS, *R_AGG_VALUES,
             R_SENT_OWNER, R_SENT_CHUNK, R_SENT_BITMAP, R_ASK_CHUNK, R_ASKERS)


def describe(entry: Entry) -> str:
    """One readable line for an entry of our tables (errors and the deploy/status listings)."""
    p = dict(entry.params)
    if entry.table == T_ROUTES and entry.action == A_FORWARD and len(entry.match) == 1:
        m = entry.match[0]
        return (f"route {int_to_ip(m.value)}/{m.prefix_len} -> port {p.get('port')} "
                f"(dst mac {int_to_mac(p.get('dst_mac', 0))})")
    if entry.table == T_ROUTES and entry.action == A_MULTICAST and len(entry.match) == 1:
        m = entry.match[0]
        return (f"results {int_to_ip(m.value)}/{m.prefix_len} -> multicast group "
                f"{p.get('group')}")
    if entry.table == T_AGG and entry.action in (A_AGGREGATE, A_TRACK) and len(entry.match) == 1:
        expected = p.get("expected", 0)
        base = p.get("slot_base", 0)
        n = p.get("slots", DEFAULT_JOB_SLOTS)
        if entry.action == A_TRACK:
            return (f"track job {entry.match[0].value}: forward, count first transmissions "
                    f"of bitmap {expected:#x} ({bin(expected).count('1')} workers), slots "
                    f"{base}..{base + n - 1}")
        return (f"aggregate job {entry.match[0].value}: wait for bitmap {expected:#x} "
                f"({bin(expected).count('1')} workers), slots {base}..{base + n - 1}")
    if entry.table == T_ECN and entry.default:
        if entry.action == A_ECN_ON:
            return f"ECN: mark CE at queue depth >= {p.get('threshold')}"
        if entry.action == A_ECN_OFF:
            return "ECN: off"
    if entry.table == T_FAULT and entry.default:
        if entry.action == A_DROP:
            return (f"fault injection: drop {p.get('share', 0) / DROP_SCALE:.2%} of "
                    "aggregation packets")
        if entry.action == A_NO_FAULT:
            return "fault injection: off"
    return describe_entry(entry)
