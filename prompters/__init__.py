"""Built-in prompters (installed as intrabench.prompters)."""
