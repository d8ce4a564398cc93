"""The pure parts of advice: ``target`` (what an advice aims for), ``changes`` (the changes as code a
user pastes) and ``anatomy`` (what is in memory at a step's peak).  The search that traces each changed
model is ``fxviz.api.advice``."""
