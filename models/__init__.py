"""Built-in models (installed as intrabench.models), grouped by kind.

* ``sam_family/``: the 2D SAM-family adapters (SAM, SAM 2, MedSAM, MedSAM2, LiteMedSAM,
  MobileSAM, SAM-Med2D);
* ``volumetric/``: the 3D networks (SAM-Med3D, SegVol, VISTA3D, nnInteractive, the CVPR 2025
  submission);
* ``classical/``: baselines without a network (random walkers, region growing);
* ``runtime/``: how the networks run (encoder backends, precision, exports, caches).

The registry imports every public module of every subpackage; modules starting with ``_``
are helpers and register nothing.
"""
