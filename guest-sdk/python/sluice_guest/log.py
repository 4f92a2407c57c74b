"""Messages for the operator; they become LOG messages in the host's output. What a connector
prints to stdout or stderr does too."""

from wit_world.imports import log as wit


def debug(message: str) -> None:
    wit.log(wit.Level.DEBUG, str(message))


def info(message: str) -> None:
    wit.log(wit.Level.INFO, str(message))


def warn(message: str) -> None:
    wit.log(wit.Level.WARN, str(message))


def error(message: str) -> None:
    wit.log(wit.Level.ERROR, str(message))
