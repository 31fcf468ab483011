"""What CASSINI reasons about, before any placement: jobs' profiles (and a profile measured
from a packet capture), one link's geometry (the unified circle and its best shifts) and the
Affinity graph that turns many links' shifts into one per job."""
