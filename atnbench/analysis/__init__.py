"""Analyses that explain *why* ATN behaves differently (the ATN paper's Sects. 3 and 5.2, Table 6).

- ``stats``: post-normalization mean and variance per time step, recorded through the
  normalizations' ``probe`` (Sect. 5.2, Fig. 6).
- ``invariances``: Table 6 (Appendix B) measured: which weight and data transformations leave
  each normalization's output unchanged.
- ``gradcheck``: Proposition 1's closed-form derivative (eqs. 11-13, A10) against autograd.
"""
