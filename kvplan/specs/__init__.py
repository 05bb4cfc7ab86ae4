"""Specs: the validated, immutable descriptions of a model (its layer kinds), hardware, parallel layout, dtypes
and typed values. The bottom layer: nothing here imports from above."""
