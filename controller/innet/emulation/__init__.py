"""Emulated networks (Mininet with BMv2 switches) and the experiments that run on them."""
