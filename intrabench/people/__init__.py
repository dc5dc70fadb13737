"""People in the loop: sessions with a live model (:mod:`intrabench.people.session_log`,
:mod:`intrabench.people.sessions`) and the clicks people make."""
