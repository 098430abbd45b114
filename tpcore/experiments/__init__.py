"""Reproductions of paper tables and figures; each is a function with a budget argument."""
