"""A ``TORCH_TRACE`` log read without torch: ``reader`` (records, streamed), ``index`` (compiles,
pieces, statuses, ranks), ``signature`` (saved bytes from printed signatures), ``totals`` (a run's step
and totals), ``guards`` (module facts from dynamo's guards), ``knapsack`` (the run's own budget solve),
``layout`` (what the log tells of a real step's copies).  ``rebuild/`` turns one graph's text back
into a ``Capture`` (with torch).
"""
