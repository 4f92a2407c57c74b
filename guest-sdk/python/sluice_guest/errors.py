"""Errors that say whose fault they are."""

from contextlib import contextmanager

CONFIG = "config"
TRANSIENT = "transient"
SYSTEM = "system"


class Error(Exception):
    """A connector error. `kind` decides what the operator is told: fix the config
    (`config`), try again later (`transient`), or report a bug (`system`)."""

    def __init__(self, kind: str, message: str):
        if kind not in (CONFIG, TRANSIENT, SYSTEM):
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message

    @classmethod
    def config(cls, message) -> "Error":
        return cls(CONFIG, str(message))

    @classmethod
    def transient(cls, message) -> "Error":
        return cls(TRANSIENT, str(message))

    @classmethod
    def system(cls, message) -> "Error":
        return cls(SYSTEM, str(message))

    def __str__(self) -> str:
        label = {CONFIG: "config error", TRANSIENT: "transient error", SYSTEM: "error"}[self.kind]
        return f"{label}: {self.message}"


@contextmanager
def context(what: str):
    """Prefixes the message of an `Error` raised inside the block, keeping its kind:

        with context("cannot list accounts"):
            accounts_page(config, 1)
    """
    try:
        yield
    except Error as e:
        raise Error(e.kind, f"{what}: {e.message}") from e
