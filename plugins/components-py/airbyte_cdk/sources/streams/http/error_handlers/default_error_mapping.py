"""The CDK's DEFAULT_ERROR_MAPPING: what each status (or requests exception) means by default."""

from requests.exceptions import InvalidSchema, InvalidURL, RequestException

from airbyte_cdk.models import FailureType
from airbyte_cdk.sources.streams.http.error_handlers.response_models import ErrorResolution, ResponseAction

_R, _FAIL, _RL = ResponseAction.RETRY, ResponseAction.FAIL, ResponseAction.RATE_LIMITED
_SYS, _CFG, _TR = FailureType.system_error, FailureType.config_error, FailureType.transient_error

DEFAULT_ERROR_MAPPING = {
    InvalidSchema: ErrorResolution(_FAIL, _CFG, "Invalid Protocol Schema: The endpoint that data is being requested from is using an invalid or insecure. Exception: requests.exceptions.InvalidSchema"),
    InvalidURL: ErrorResolution(_R, _TR, "Invalid URL specified or DNS error occurred: The endpoint that data is being requested from is not a valid URL. Exception: requests.exceptions.InvalidURL"),
    RequestException: ErrorResolution(_R, _TR, "An exception occurred when making the request. Exception: requests.exceptions.RequestException"),
    400: ErrorResolution(_FAIL, _SYS, "HTTP Status Code: 400. Error: Bad request. Please check your request parameters."),
    401: ErrorResolution(_FAIL, _CFG, "HTTP Status Code: 401. Error: Unauthorized. Please ensure you are authenticated correctly."),
    403: ErrorResolution(_FAIL, _CFG, "HTTP Status Code: 403. Error: Forbidden. You don't have permission to access this resource."),
    404: ErrorResolution(_FAIL, _SYS, "HTTP Status Code: 404. Error: Not found. The requested resource was not found on the server."),
    405: ErrorResolution(_FAIL, _SYS, "HTTP Status Code: 405. Error: Method not allowed. Please check your request method."),
    408: ErrorResolution(_R, _TR, "HTTP Status Code: 408. Error: Request timeout."),
    429: ErrorResolution(_RL, _TR, "HTTP Status Code: 429. Error: Too many requests."),
    500: ErrorResolution(_R, _TR, "HTTP Status Code: 500. Error: Internal server error."),
    502: ErrorResolution(_R, _TR, "HTTP Status Code: 502. Error: Bad gateway."),
    503: ErrorResolution(_R, _TR, "HTTP Status Code: 503. Error: Service unavailable."),
    504: ErrorResolution(_R, _TR, "HTTP Status Code: 504. Error: Gateway timeout."),
}
