"""The SAM family: SAM, SAM 2, MedSAM, MedSAM2, LiteMedSAM, MobileSAM and SAM-Med2D, with the
helpers only they use (``_sam_common``: the slice adapters' shared machinery)."""
