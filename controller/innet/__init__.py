"""innet: a controller stack for in-network computing on P4 switches.

Two planners (SOAR, where to aggregate; CASSINI, when each job communicates) produce plain
data; the P4Runtime controller and the Mininet harness turn that data into switch state and
measurements.
"""

__version__ = "0.1.0"
