"""Error types. Every one is a ``ValueError`` so callers can catch bad input uniformly; the CLI
prints the message as one line and exits 2."""


class TpcoreError(ValueError):
    """Bad input: the message names the offending value and what was expected."""


class BackendError(TpcoreError):
    """The requested array backend cannot run here; the message says why."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or inf; the message names the step and the last finite loss."""
