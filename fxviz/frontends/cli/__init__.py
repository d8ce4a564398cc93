"""The ``fxviz`` command: the same facts as the notebook, in a terminal.

Every error is one line on stderr and a non-zero exit; ``--debug`` shows the traceback.  The rooms:
``specs`` (the MODEL argument), ``source`` (opening a model or a log), ``options`` (registering a command and
the options commands share), ``commands``/``files``/``logs_table``/``diff`` (the commands), ``words`` (hints
spelled as options, text fitted to the terminal, one-line errors), ``entry`` (the parser and ``main``, with
its exit codes).  Nothing here imports torch until a command runs: ``fxviz --help`` is fast.
"""
