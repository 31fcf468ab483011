"""SOAR: which at most k switches should aggregate so that the network carries the least.

The names a notebook needs, in one place (docs/api.md): build or load an instance (`Tree`,
`tree_from_dict`, `load_tree`, `binary_tree`, `random_tree`), plan it (`solve` for SOAR's
optimum, `run_strategy` for SOAR or a baseline by name, `STRATEGIES`), and price any choice
of switches (`phi`). Planning a job on a topology and deploying it is one layer up, in
`innet.plan` and `innet.p4rt` (docs/api.md shows both).
"""

from innet.soar.baselines import STRATEGIES, run_strategy
from innet.soar.generate import binary_tree, random_tree
from innet.soar.model import Plan, Tree, load_tree, phi, tree_from_dict, tree_to_dict
from innet.soar.solver import solve

__all__ = ["STRATEGIES", "Plan", "Tree", "binary_tree", "load_tree", "phi", "random_tree",
           "run_strategy", "solve", "tree_from_dict", "tree_to_dict"]
