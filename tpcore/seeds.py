"""Seeds derived by name: every random stream of a study gets its own seed from the user's seed
and the names of the study and the part drawing it, never from an offset added to the seed."""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *names: object) -> int:
    """The first 4 bytes (big-endian) of the BLAKE2b hash of ``seed`` and ``names`` joined by
    ``/``: a seed in ``0 .. 2**32 - 1``, the same on every machine and Python run (unlike
    ``hash()``, which is salted per process), different for every name.
    ``derive_seed(0, "sorting", "causal", "validation")``."""
    text = "/".join(str(part) for part in (seed, *names))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")
