"""requests.status_codes.codes: names of HTTP statuses, lower and upper case (from http.HTTPStatus)."""

from http import HTTPStatus


class LookupDict(dict):
    def __init__(self, name=None):
        self.name = name
        super().__init__()

    def __getitem__(self, key):
        return self.__dict__.get(key, None)

    def get(self, key, default=None):
        return self.__dict__.get(key, default)


codes = LookupDict(name="status_codes")
for _status in HTTPStatus:
    setattr(codes, _status.name.lower(), _status.value)
    setattr(codes, _status.name, _status.value)
codes.ok = 200
codes.OK = 200
