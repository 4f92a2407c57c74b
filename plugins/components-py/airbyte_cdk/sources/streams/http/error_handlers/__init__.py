from .backoff_strategy import BackoffStrategy, DefaultBackoffStrategy
from .error_handler import ErrorHandler
from .error_message_parser import ErrorMessageParser
from .http_status_error_handler import HttpStatusErrorHandler
from .json_error_message_parser import JsonErrorMessageParser
from .response_models import ErrorResolution, ResponseAction

__all__ = ["BackoffStrategy", "DefaultBackoffStrategy", "ErrorHandler", "ErrorMessageParser", "HttpStatusErrorHandler",
           "JsonErrorMessageParser", "ErrorResolution", "ResponseAction"]
