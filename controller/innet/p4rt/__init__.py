"""The P4Runtime side, generic over P4 programs: it knows no table of innet's program.

Modules: entities (table entries, default actions, multicast groups, clone sessions, by
name), schema (P4Info, names -> ids, value encodings), managed (what the controller owns in a
program, handed in from above), encode (entities <-> protobuf), client (one session per
switch), deploy (read, diff, write the difference, replication engine included), controller
(the long-running reconciler). What P4Runtime cannot say (BMv2's queue settings, register
cleaning) goes to a side channel handed in (innet.bmv2.thrift). It is handed switch addresses;
where local BMv2 switches listen is innet.bmv2.local's convention. innet's program, names
and intent are in innet.plan; BMv2 processes start in innet.bmv2; the test doubles live in
innet.testing.
"""
