"""What to change so a training step fits: ``search`` (``advise``: each change traced and partitioned
as torch.compile does) and ``options`` (``Advice``, ``Option``: predictions, code to paste, ``trace()``).
The pure parts (targets, the changes as code, the peak's anatomy) are ``fxviz.analysis.advice``.
"""
