"""The missing-gradient doctor: which parameters get no gradient, where the path is cut, and how
to fix it, in words a user understands.

``diagnose`` reads the captured joint graph(s) (every piece of a trace with graph breaks), their
partitions, and, only for parameters the graphs cannot explain, one eager probe run of the model
(``gradient_paths.eager_paths``).  It returns plain data: a list of ``Finding`` and a
per-parameter table.  Rendering lives in ``fxviz.render.text.doctor_view``.  One module per family
of findings: ``no_gradient``, ``dropped``, ``duplicates``, ``graph_breaks``, ``measured``, ``logged`` (a logged
run's partitioner settings), ``allgathered`` (FSDP2's unsharded parameters it saves); ``findings`` holds
the vocabulary and the gathering.
"""
