"""The P4Runtime side: intent (pure), encoding, one client per switch, deploy.

Modules: schema (P4Info, names -> ids, value encodings), intent (what each switch must hold,
from topology, workloads and plans), encode (intent entries <-> protobuf), client (one
session per switch), deploy (read, diff, write the difference), thrift (BMv2 queue settings),
local (where local BMv2 switches listen), registers (slot registers), controller, cli. BMv2
processes start in innet.bmv2; the test doubles live in innet.testing.
"""
