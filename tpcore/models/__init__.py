"""Models built from the explicit-gradient blocks of ``tpcore.nn``."""
