from airbyte_cdk.sources.message.repository import InMemoryMessageRepository, MessageRepository, NoopMessageRepository

__all__ = ["InMemoryMessageRepository", "MessageRepository", "NoopMessageRepository"]
