"""Time-aware evaluation (the DAVIS interactive track's protocol): quality against the
clinician's accumulated time, human time plus the time spent waiting for the model, within a
time budget per target. :mod:`.human` is the time model (seconds per interaction kind),
:mod:`.budget` the curves and their metrics, :mod:`.latency` the models' latency table.
See docs/time-aware.md.
"""
