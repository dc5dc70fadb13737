"""What a run measures: pure functions of masks and result rows.

``metrics`` (per-step Dice, IoU, NSD, HD95), ``episode_metrics`` (per-episode summaries: AUCs,
interactions to a Dice), ``aggregate`` (target -> case -> class -> dataset, spread, bootstrap
CIs, missing values counted), ``cvpr25`` (the CVPR 2025 challenge's definitions).

Imports neither :mod:`intrabench.engine` nor :mod:`intrabench.io` (nothing here runs a model or
touches a file), nor the component packages.
"""
