"""Charts: matplotlib plots of a sweep and a timeline, and their small SVG twins for pages.
"""
