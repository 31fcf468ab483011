"""The plan: what innet's program must hold on every switch, derived by pure functions.

program (every table, action, counter and register name of p4src/innet.p4, the committed
P4Info and BMv2 JSON, and `describe` for innet's entries), intent (workloads, aggregation
trees, slots, per-switch intent and its entries), registers (the aggregation slots' register
cells), pipeline (innet's program loaded with what the controller manages in it).
"""
