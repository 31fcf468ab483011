"""What the `innet cassini` commands run: the evaluation of one job set, the paper's traces
and their replay, the sweeps over random draws, and the plots."""
