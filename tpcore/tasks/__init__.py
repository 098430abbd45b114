"""Data generators. Host-only: they use NumPy directly and return NumPy arrays."""
