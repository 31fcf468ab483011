import sys
from pathlib import Path

# tests import their oracles and helpers from this folder (soar_oracle.py, ...)
sys.path.insert(0, str(Path(__file__).parent))
