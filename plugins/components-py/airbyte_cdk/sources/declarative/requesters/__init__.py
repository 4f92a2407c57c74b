from airbyte_cdk.sources.declarative.requesters.http_requester import HttpRequester
from airbyte_cdk.sources.declarative.requesters.request_option import RequestOption, RequestOptionType
from airbyte_cdk.sources.declarative.requesters.requester import HttpMethod, Requester

__all__ = ["HttpMethod", "HttpRequester", "RequestOption", "RequestOptionType", "Requester"]
