"""A model (or a function) and its example inputs traced now: ``routes`` (``capture``: dynamo, aot or
closure), ``loss`` (what is differentiated and where the user's step applies it), ``inputs`` (names and
checks of what the user passed).
"""
