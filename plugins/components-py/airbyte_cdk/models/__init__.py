"""airbyte_cdk.models: the Airbyte protocol enums and messages custom code names (plain dataclasses)."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional


class Type(Enum):
    RECORD = "RECORD"
    STATE = "STATE"
    LOG = "LOG"
    SPEC = "SPEC"
    CONNECTION_STATUS = "CONNECTION_STATUS"
    CATALOG = "CATALOG"
    TRACE = "TRACE"
    CONTROL = "CONTROL"
    DESTINATION_CATALOG = "DESTINATION_CATALOG"


class Level(Enum):
    FATAL = "FATAL"
    ERROR = "ERROR"
    WARN = "WARN"
    INFO = "INFO"
    DEBUG = "DEBUG"
    TRACE = "TRACE"


class FailureType(Enum):
    system_error = "system_error"
    config_error = "config_error"
    transient_error = "transient_error"


class SyncMode(Enum):
    full_refresh = "full_refresh"
    incremental = "incremental"


@dataclass
class StreamDescriptor:
    name: str
    namespace: Optional[str] = None


@dataclass
class AirbyteLogMessage:
    level: Level
    message: str
    stack_trace: Optional[str] = None


@dataclass
class AirbyteRecordMessage:
    stream: str
    data: Dict[str, Any]
    emitted_at: int
    namespace: Optional[str] = None
    meta: Optional[Any] = None
    file_reference: Optional[Any] = None


@dataclass
class AirbyteRecordMessageFileReference:
    staging_file_url: Optional[str] = None
    source_file_relative_path: Optional[str] = None
    file_size_bytes: Optional[int] = None


@dataclass
class AirbyteMessage:
    type: Type
    log: Optional[AirbyteLogMessage] = None
    spec: Optional[Any] = None
    connectionStatus: Optional[Any] = None
    catalog: Optional[Any] = None
    record: Optional[AirbyteRecordMessage] = None
    state: Optional[Any] = None
    trace: Optional[Any] = None
    control: Optional[Any] = None
