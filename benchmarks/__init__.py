"""fxviz's benchmark against torch alone; run it as ``python benchmarks/bench.py`` (see there)."""
