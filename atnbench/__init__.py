"""atnbench: benchmark and ablation tool for normalization in recurrent networks."""

__version__ = "0.1.0"
