"""Analysis layer: plain data about captured graphs (no drawing, no printing)."""
