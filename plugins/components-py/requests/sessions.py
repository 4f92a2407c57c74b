"""Session: merges its headers/params/auth into each request and sends it through transport.send."""

from . import transport
from .models import Request
from .structures import CaseInsensitiveDict


class Session:
    def __init__(self):
        self.headers = CaseInsensitiveDict({"User-Agent": "python-requests (sluice)", "Accept": "*/*"})
        self.auth = None
        self.params = {}
        self.proxies = {}
        self.hooks = {"response": []}
        self.verify = True
        self.cert = None
        self.adapters = {}
        self.cookies = {}
        self.max_redirects = 30
        self.trust_env = False

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()

    def prepare_request(self, request):
        headers = CaseInsensitiveDict(self.headers)
        for k, v in (request.headers or {}).items():
            if v is None:
                headers.pop(k, None)
            else:
                headers[k] = v
        params = dict(self.params or {})
        params.update(request.params or {})
        p = Request(method=request.method, url=request.url, headers=headers, files=request.files,
                    data=request.data, json=request.json, params=params,
                    auth=request.auth or self.auth, hooks=request.hooks).prepare()
        return p

    def request(self, method, url, params=None, data=None, headers=None, cookies=None, files=None,
                auth=None, timeout=None, allow_redirects=True, proxies=None, hooks=None,
                stream=None, verify=None, cert=None, json=None):
        req = Request(method=method.upper(), url=url, headers=headers, files=files, data=data or {},
                      json=json, params=params or {}, auth=auth, cookies=cookies, hooks=hooks)
        return self.send(self.prepare_request(req), timeout=timeout)

    def send(self, request, **kwargs):
        response = transport.send(request, timeout=kwargs.get("timeout"))
        for hook in (self.hooks or {}).get("response", []):
            response = hook(response) or response
        return response

    def get(self, url, **kwargs):
        return self.request("GET", url, **kwargs)

    def options(self, url, **kwargs):
        return self.request("OPTIONS", url, **kwargs)

    def head(self, url, **kwargs):
        return self.request("HEAD", url, **kwargs)

    def post(self, url, data=None, json=None, **kwargs):
        return self.request("POST", url, data=data, json=json, **kwargs)

    def put(self, url, data=None, **kwargs):
        return self.request("PUT", url, data=data, **kwargs)

    def patch(self, url, data=None, **kwargs):
        return self.request("PATCH", url, data=data, **kwargs)

    def delete(self, url, **kwargs):
        return self.request("DELETE", url, **kwargs)

    def mount(self, prefix, adapter):
        self.adapters[prefix] = adapter

    def close(self):
        pass


def session():
    return Session()
