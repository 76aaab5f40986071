"""Progress and failure reporting as JSON lines on stdout, the only channel the TypeScript activity reads."""
import json
import sys


class TrainerError(Exception):
    """A failure with a type the activity maps to a retryable or non-retryable Temporal failure."""

    def __init__(self, name: str, message: str, retryable: bool):
        super().__init__(message)
        self.name = name
        self.retryable = retryable

    @property
    def type(self) -> str:
        return f"{'retryable' if self.retryable else 'fatal'}:{self.name}"


class ConfigError(TrainerError):
    def __init__(self, message: str):
        super().__init__("ConfigError", message, retryable=False)


class Interrupted(TrainerError):
    """SIGTERM/SIGINT: the trainer checkpointed and stopped; a retry resumes from that checkpoint."""

    def __init__(self, message: str = "interrupted by signal"):
        super().__init__("Interrupted", message, retryable=True)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, default=float) + "\n")
    sys.stdout.flush()


def classify(exc: BaseException) -> TrainerError:
    """Unknown exceptions are retryable (the activity's retry policy bounds them); bad input is not."""
    if isinstance(exc, TrainerError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return TrainerError("FileNotFound", str(exc), retryable=False)
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return TrainerError("OutOfMemory", str(exc), retryable=True)
    return TrainerError(type(exc).__name__, str(exc) or repr(exc), retryable=True)
