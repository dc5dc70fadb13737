"""Tables and reports built from results."""
