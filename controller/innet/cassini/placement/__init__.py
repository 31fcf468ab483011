"""Where jobs run: the cluster as racks of GPU slots, the Themis-like base's candidate
placements, and the scheduler that scores them with CASSINI and checks the best in the
fluid model."""
