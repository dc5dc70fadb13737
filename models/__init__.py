"""Built-in models (installed as intrabench.models)."""
