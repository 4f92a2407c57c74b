"""Call-rate policy classes with the CDK's constructors. Pacing is the host's (net/pace): these
objects only record what the manifest or custom code asked for."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, List, Mapping, Optional


@dataclass
class Rate:
    limit: int
    interval: timedelta


class RequestMatcher:
    def __call__(self, request: Any) -> bool:
        raise NotImplementedError


class HttpRequestMatcher(RequestMatcher):
    def __init__(self, method: Optional[str] = None, url: Optional[str] = None, params: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, Any]] = None):
        self._method = method.upper() if method else None
        self._url = url
        self._params = dict(params or {})
        self._headers = dict(headers or {})

    def __call__(self, request: Any) -> bool:
        if self._method and getattr(request, "method", None) != self._method:
            return False
        if self._url and not str(getattr(request, "url", "")).startswith(self._url):
            return False
        return True


class AbstractCallRatePolicy:
    pass


class BaseCallRatePolicy(AbstractCallRatePolicy):
    def __init__(self, matchers: List[RequestMatcher]):
        self._matchers = matchers

    def matches(self, request: Any) -> bool:
        return not self._matchers or any(m(request) for m in self._matchers)


class UnlimitedCallRatePolicy(BaseCallRatePolicy):
    pass


class FixedWindowCallRatePolicy(BaseCallRatePolicy):
    def __init__(self, next_reset_ts: Any, period: timedelta, call_limit: int, matchers: List[RequestMatcher]):
        super().__init__(matchers)
        self._period = period
        self._call_limit = call_limit


class MovingWindowCallRatePolicy(BaseCallRatePolicy):
    def __init__(self, rates: List[Rate], matchers: List[RequestMatcher]):
        super().__init__(matchers)
        self._rates = rates


class AbstractAPIBudget:
    pass


class APIBudget(AbstractAPIBudget):
    def __init__(self, policies: List[AbstractCallRatePolicy], maximum_attempts_to_acquire: int = 100000) -> None:
        self._policies = policies
        self._maximum_attempts_to_acquire = maximum_attempts_to_acquire

    def acquire_call(self, request: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        pass  # the host paces requests

    def update_from_response(self, request: Any, response: Any) -> None:
        pass


class HttpAPIBudget(APIBudget):
    def __init__(self, ratelimit_reset_header: str = "ratelimit-reset", ratelimit_remaining_header: str = "ratelimit-remaining", status_codes_for_ratelimit_hit=(429,), **kwargs: Any):
        super().__init__(**kwargs)


class LimiterMixin:
    """Mixed into a requests.Session by the CDK to take a budget; here it only keeps it."""

    def __init__(self, api_budget: AbstractAPIBudget, **kwargs: Any):
        self._api_budget = api_budget
        super().__init__(**kwargs)
