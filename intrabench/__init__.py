"""IntraBench: benchmark interactive segmentation models on 3D medical images."""

__version__ = "0.1.0"
