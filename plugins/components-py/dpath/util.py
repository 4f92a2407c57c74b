"""dpath.util: the deprecated aliases of dpath 2.x's top-level functions."""

from . import delete, get, new, search, set, values  # noqa: F401
