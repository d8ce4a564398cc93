"""Floor 1, the ground every other floor stands on: facts and conventions with no opinion about where a
graph came from.  ``errors`` (every error a user can cause, with its fix), ``units`` (one byte and FLOP
format), ``graph_facts`` (facts about AOTAutograd's nodes, answered once), ``fx_facts`` (public fx API
only), ``state`` (leave the user's model and session as found), ``atomic`` (atomic file writes),
``collector`` (the garbage collector kept off a trace's objects), ``supported`` (the torch range), and
``example_names``.  torch's private API is reached only through ``fxviz._torch``, the quarantine beside
this folder.  Nothing here imports torch at import time except ``graph_facts`` and ``state``.
"""
