"""Clicks collected from people as RClicks collected them, in 3D: click tasks from a run's
saved predictions (``tasks``), the page that shows them (``render``, ``page.html``, ``build``),
and the clicks imported as the ``recorded`` clickability map's CSV (``importing``)."""
