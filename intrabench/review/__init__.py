"""Mask quality review by people (the SAM mask-rating protocol, for 3D medical masks).

* :mod:`~intrabench.review.sampling`: which saved masks are rated (stratified, blinded);
* :mod:`~intrabench.review.render`: the slices, mask and prompt each job shows;
* :mod:`~intrabench.review.build`: the static rating site (``intrabench review build``);
* :mod:`~intrabench.review.ratings`: ratings joined with the metrics
  (``intrabench review import``).
"""
