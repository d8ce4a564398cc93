"""Self-contained HTML pages: ``page`` (a trace's or a run's report) and ``diff_page`` (a diff's).
"""
