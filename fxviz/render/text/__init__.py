"""Text and tables for people: the memory table, the saved table, the diff, the doctor, a measured step,
a trace's summary and the saved residuals in words.
"""
