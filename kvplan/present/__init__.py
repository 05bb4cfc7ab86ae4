"""Presentation, one module per command: a typed plan in, a ``Result`` (headline, data, tables, notes) out.

Nothing here computes a figure; it chooses titles, rows and words. Numbers stay typed values until
``kvplan.render.output`` formats them.
"""
