"""Pieces of an HTML page: ``embed`` (model text put into a page safely) and ``static_html`` (the
explorer's content as plain HTML).
"""
