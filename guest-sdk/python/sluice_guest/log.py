"""Messages for the operator; they become LOG messages in the host's output. What a connector
prints to stdout or stderr does too."""

from wit_world.imports import log as wit

from . import _warming


def _log(level, message: str) -> None:
    _warming.refuse_host("logging")
    wit.log(level, str(message))


def debug(message: str) -> None:
    _log(wit.Level.DEBUG, message)


def info(message: str) -> None:
    _log(wit.Level.INFO, message)


def warn(message: str) -> None:
    _log(wit.Level.WARN, message)


def error(message: str) -> None:
    _log(wit.Level.ERROR, message)
