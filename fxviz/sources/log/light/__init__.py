"""The light tier of a logged graph (issue 46): the graph as plain Python objects read from its text without
torch (``nodes``, ``text``), each op's module from structure and stack traces alone (``modules``, ``children``),
and the run's own partition's memory facts from the printed annotations (``storages``, ``flops``, ``logged``).
"""
