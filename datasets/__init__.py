"""Built-in datasets (installed as intrabench.datasets)."""
