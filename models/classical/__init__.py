"""Classical baselines without a network: the random walkers and 3D region growing."""
