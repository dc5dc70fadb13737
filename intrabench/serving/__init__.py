"""Models in their own environments: a model runs in another process (another virtual or
conda environment, a container, another machine) behind the model protocol.

* :mod:`.spec`: ``runs_in:`` of a model in a run config (where it runs, its timeouts);
* :mod:`.protocol` and :mod:`.wire`: what client and server say, framed as JSON and raw arrays;
* :mod:`.server`: ``intrabench serve-model NAME`` serves any registered model;
* :mod:`.connection`: starting or reaching a server, requests with deadlines, faults;
* :mod:`.client`: :class:`~.client.ServedModel`, the host's side, a :class:`Model`;
* :mod:`.building`: the model of a spec, built here or served.

docs/adding-a-model.md ("Your model in its own environment") shows the whole path.
"""
