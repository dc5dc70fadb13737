"""Target attributes: what makes a target hard, measured once per case (VizWiz-SalientObject's
characterisation of objects, for 3D medical targets).

* :mod:`~intrabench.attributes.catalogue`: every attribute with its unit and definition;
* :mod:`~intrabench.attributes.shape` and :mod:`~intrabench.attributes.intensity`: the measures;
* :mod:`~intrabench.attributes.compute`: all of them for the targets of one case;
* :mod:`~intrabench.attributes.cache`: kept per case across runs;
* :mod:`~intrabench.attributes.stratify`: results by attribute group, with bootstrap CIs and
  rank correlations (``intrabench attributes RUN``).
"""
