"""Measuring plans: the fluid model's shared step, its steady and trace simulations, and the
engines (fluid in process, ns-3 packets) that run an evaluation's arms."""
