"""Message repositories as in the CDK: custom code may emit messages (logs, state) through them."""

from collections import deque
from typing import Any, Callable, Iterable

from airbyte_cdk.models import AirbyteLogMessage, AirbyteMessage, Level, Type


class MessageRepository:
    def emit_message(self, message: AirbyteMessage) -> None:
        raise NotImplementedError

    def log_message(self, level: Level, message_provider: Callable[[], Any]) -> None:
        raise NotImplementedError

    def consume_queue(self) -> Iterable[AirbyteMessage]:
        raise NotImplementedError


class NoopMessageRepository(MessageRepository):
    def emit_message(self, message: AirbyteMessage) -> None:
        pass

    def log_message(self, level: Level, message_provider: Callable[[], Any]) -> None:
        pass

    def consume_queue(self) -> Iterable[AirbyteMessage]:
        return []


class InMemoryMessageRepository(MessageRepository):
    def __init__(self, log_level: Level = Level.INFO) -> None:
        self._message_queue: deque = deque()
        self._log_level = log_level

    def emit_message(self, message: AirbyteMessage) -> None:
        self._message_queue.append(message)

    def log_message(self, level: Level, message_provider: Callable[[], Any]) -> None:
        order = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
        if order.index(level.value) >= order.index(self._log_level.value):
            self._message_queue.append(AirbyteMessage(type=Type.LOG, log=AirbyteLogMessage(level=level, message=str(message_provider()))))

    def consume_queue(self) -> Iterable[AirbyteMessage]:
        while self._message_queue:
            yield self._message_queue.popleft()
