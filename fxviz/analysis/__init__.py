"""Floor 3, analysis: plain data about captured graphs (no drawing, no printing, no capture).  One
folder per job: ``strategy/`` (strategies and partitions), ``memory/`` (static memory: storage, the
memory table, the saved table, timeline, sweep, step), ``real/`` (real-tensor runs: measure, replay,
gradients), ``doctor/`` (missing gradients and what a step keeps), ``diff/`` (two traces matched),
``graph/`` (node and parameter tables, code, pieces) and ``advice/`` (targets, changes, a peak's anatomy)."""
