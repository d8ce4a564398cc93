"""Floor 5, what users hold: ``Trace`` (``facade``), ``fxviz.trace`` (``tracing``), a logged ``Run``
(``run``), ``Diff`` (``diffing``) and advice (``advice/``): the one floor that builds Traces and
re-captures models.  Each method chooses, caches and calls the floors below.
"""
