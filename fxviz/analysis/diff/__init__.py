"""Two traces matched value by value: ``match`` (which value is which), ``values`` (what one saves that
the other does not, and why), ``step_pairs`` (two whole steps side by side).
"""
