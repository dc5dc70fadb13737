"""Sessions with a live model: a local page where a person segments a target while the model
runs on the machine (:mod:`.server`), and the import of the session logs (:mod:`.importing`)."""
