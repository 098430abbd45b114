"""Analysis of trained models: circuits, attention maps, probes, plots."""
