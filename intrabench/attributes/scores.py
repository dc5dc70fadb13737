"""The per-target scores the attribute analysis reads, by the name the CLI gives them.

Its own module so that building the CLI's parser (``--metric`` choices) imports no pandas.
"""

#: CLI name -> column of the per-target table (final Dice and NSD, normalised Dice AUC, the
#: effort to reach Dice 0.8)
METRICS = {
    "dice": "dice_final",
    "nsd": "nsd_final",
    "dice_auc": "dice_auc_norm",
    "effort_to_dice_0.8": "effort_to_dice_0.8",
}
