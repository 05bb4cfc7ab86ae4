"""Render: the output layer. A command's ``Result`` becomes a table, JSON, CSV or Markdown (units, width, plots,
progress); nothing here computes a figure."""
