"""The built-in clickability models, one module each; the registry imports every module here.

``uniform`` and ``distance`` are RClicks' baselines (section 4.1), ``contrast-aware`` follows
its observations from the image without a trained network, ``recorded`` builds maps from
clicks people made (section 4.3), ``network`` plugs in a learned clickability network.
"""
