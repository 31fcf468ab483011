"""Test doubles and test plumbing: shipped with the package, imported by tests and benchmarks only.

fake_server (an in-process P4Runtime server that checks every request against the P4Info),
bmv2 (BMv2 switches without Mininet, host namespaces, veth links, sockets inside a namespace).
No product module imports this package; an import-linter contract in pyproject.toml holds it.
"""
