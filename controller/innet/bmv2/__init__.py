"""BMv2, the software switch: the one way this project starts and stops `simple_switch_grpc`.

launcher (its command line, start, stop), local (where local switches listen, every switch's
address, free and reserved ports, waiting for a port), thrift (its runtime CLI: queue settings,
register cleaning; the side channel the P4Runtime layer is handed). The Mininet harness
(innet.emulation.net) and the test helpers (innet.testing.bmv2) both run switches through it.
"""
