from abc import abstractmethod
from typing import Any, Mapping


class StateMigration:
    """Rewrites an old stream state (CDK: should_migrate(state) -> bool, migrate(state) -> state)."""

    @abstractmethod
    def should_migrate(self, stream_state: Mapping[str, Any]) -> bool:
        pass

    @abstractmethod
    def migrate(self, stream_state: Mapping[str, Any]) -> Mapping[str, Any]:
        pass
