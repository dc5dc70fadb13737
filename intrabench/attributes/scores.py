"""The per-target scores the attribute analysis reads, by the name the CLI gives them.

Its own module so that building the CLI's parser (``--metric`` choices) imports no pandas (nor
numpy): the scores come from the metric declarations
(:func:`intrabench.evaluation.metric_registry.attribute_scores`).
"""

from intrabench.evaluation.metric_registry import attribute_scores

#: CLI name -> column of the per-target table (final Dice and NSD, normalised Dice AUC, the
#: effort to reach Dice 0.8), as the registered metrics declare them
METRICS = attribute_scores()
