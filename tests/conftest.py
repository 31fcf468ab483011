import sys
from pathlib import Path

# tests import their oracles (tests/) and the benchmark's reference DP (benchmarks/)
_HERE = Path(__file__).parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "benchmarks"))
