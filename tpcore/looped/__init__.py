"""Looped transformer computer: encodings, punchcard layout, weight generators, SUBLEQ/FLEQ."""
