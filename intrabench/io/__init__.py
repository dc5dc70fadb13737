"""What a run reads and writes.

``volume`` (images and labels in canonical (z, y, x) orientation, truncation and NaN checks),
``results`` (unit files, the consolidated results store, run metadata), ``run_directory`` (who
may write to a run folder), ``download`` (resumable, checksummed downloads and safe archive
extraction), ``checkpoints`` (checkpoint files, ``weights_only`` loading, strict fitting).

Imports neither :mod:`intrabench.engine` nor :mod:`intrabench.evaluation`, nor the component
packages.
"""
