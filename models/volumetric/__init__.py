"""Volumetric models, which predict a 3D volume at once: SAM-Med3D, SegVol, VISTA3D,
nnInteractive and the CVPR 2025 challenge's submission, with their network definitions."""
