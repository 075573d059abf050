"""Data sets used by the examples (loaders only: nothing is downloaded)."""
