"""AirbyteTracedException as in airbyte_cdk.utils.traced_exception: str() is the user message."""

from typing import Optional

from airbyte_cdk.models import FailureType, StreamDescriptor


class AirbyteTracedException(Exception):
    def __init__(
        self,
        internal_message: Optional[str] = None,
        message: Optional[str] = None,
        failure_type: FailureType = FailureType.system_error,
        exception: Optional[BaseException] = None,
        stream_descriptor: Optional[StreamDescriptor] = None,
    ):
        self.internal_message = internal_message
        self.message = message
        self.failure_type = failure_type
        self._exception = exception
        self._stream_descriptor = stream_descriptor
        super().__init__(internal_message)

    def __str__(self) -> str:
        if self.message is not None:
            return self.message
        if self.internal_message is not None:
            return self.internal_message
        return ""

    @classmethod
    def from_exception(cls, exc: BaseException, stream_descriptor=None, *args, **kwargs):
        return cls(internal_message=str(exc), exception=exc, stream_descriptor=stream_descriptor, *args, **kwargs)
