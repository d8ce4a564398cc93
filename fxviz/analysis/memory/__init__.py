"""Static memory of a partition: ``storage`` (storages, saved bytes, liveness, peaks, recompute cost),
``table`` (the memory table's rows and captions), ``saved`` (the saved table), ``timeline`` (bytes held
after each node), ``sweep`` (the budget trade-off), ``step`` (the whole training step's table).
"""
