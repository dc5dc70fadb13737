"""Benchmark and test doubles, outside the built-in registry.

* :mod:`intrabench.testing.synthetic_network`: ``synthetic-network`` and
  ``synthetic-network-2d``, stand-ins with a fixed forward time (not segmentation methods);
  registered only when imported (``imports: [intrabench.testing.synthetic_network]`` in a
  config, or an import in the benchmark or test that uses them);
* :mod:`intrabench.testing.flops`: FLOP counting for the throughput benchmark.
"""
