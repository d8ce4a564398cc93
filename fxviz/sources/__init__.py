"""Floor 2: where a joint graph comes from.  ``graphs`` holds the types every floor above reads
(``JointGraph``, ``Capture`` and the ``Source`` it was made from: ``ModelSource`` or ``LogSource``);
``roles`` names and classifies every node; ``model/`` traces a model now (routes, loss, inputs);
``log/`` reads a ``TORCH_TRACE`` log: its torch-free index (reader, index, signature, totals, guards,
knapsack, layout) and, under ``log/rebuild/``, the rebuild of one logged graph with torch.

This package's ``__init__`` imports nothing: ``fxviz logs`` reads the index without loading torch.
"""
