"""IntraBench: benchmark interactive segmentation models on 3D medical images."""

__version__ = "0.1.0"

from intrabench import old_paths as _old_paths

_old_paths.install()  # old module paths (intrabench.models.sam_family.sam, ...) keep importing, with a warning
