"""The P4Runtime side: intent (pure), encoding, one client per switch, deploy, BMv2 helpers.

Modules: schema (P4Info, names -> ids, value encodings), intent (what each switch must hold,
from topology, workloads and plans), encode (intent entries <-> protobuf), client (one
session per switch), deploy (read, diff, write the difference), thrift (BMv2 queue settings),
bmv2 (start BMv2 processes and veth/namespace plumbing), fake_server (test aid), cli.
"""
