"""Floor 7, the front ends, each a thin shell over the same payloads: ``widgets/`` (the notebook explorer,
``fxviz.explore``), ``report/`` (self-contained HTML pages, ``fxviz.report``), ``cli/`` (the ``fxviz``
command) and ``static/`` (the one front-end script and styles the widget and the report share)."""
