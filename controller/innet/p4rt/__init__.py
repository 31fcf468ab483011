"""The P4Runtime side, generic over P4 programs: it knows no table of innet's program.

Modules: entities (table entries, default actions, multicast groups, clone sessions, by
name), schema (P4Info, names -> ids, value encodings), managed (what the controller owns in a
program, handed in from above), encode (entities <-> protobuf), client (one session per
switch), deploy (read, diff, write the difference), controller (the long-running
reconciler), thrift (BMv2 queue settings and CLI commands). It is handed switch addresses;
where local BMv2 switches listen is innet.bmv2.local's convention. innet's program, names
and intent are in innet.plan; BMv2 processes start in innet.bmv2; the test doubles live in
innet.testing.
"""
