"""One logged graph back as a ``Capture``, with torch: ``graph_code`` (``print_readable`` text ->
``GraphModule``), ``foreign`` (what a log from another torch needs), ``modules`` and ``children`` (each
op's module, as a model trace gives it), ``from_log`` (``capture_from_log``, the one place a logged
graph's nodes are classified).
"""
