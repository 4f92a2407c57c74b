"""The part of dpath 2.x that custom components call: get, values, search, new, set.

A glob is a list of segments or a "/"-separated string. A segment matches a mapping key or a list
index with fnmatch (so "*" matches every key); "**" (any depth) is not supported and says so.
"""

from fnmatch import fnmatchcase

from . import exceptions
from .exceptions import InvalidGlob, PathNotFound

_MISSING = object()


def _split(glob, separator):
    if isinstance(glob, str):
        glob = [s for s in glob.split(separator)] if separator else [glob]
        if glob and glob[0] == "":
            glob = glob[1:]
    segments = list(glob)
    for s in segments:
        if s == "**":
            raise NotImplementedError("dpath shim: the '**' glob (any depth) is not supported")
    return segments


def _children(node):
    if isinstance(node, dict) or hasattr(node, "items") and hasattr(node, "keys"):
        return list(node.items())
    if isinstance(node, (list, tuple)):
        return list(enumerate(node))
    return []


def _segment_matches(key, segment):
    # dpath compares the key with fnmatch when both are strings, else with ==; list indices as strings
    if isinstance(segment, str):
        return fnmatchcase(str(key), segment)
    return key == segment


def _walk(node, segments, path=()):
    """Yield (path, value) for every leaf of node matched by segments."""
    if not segments:
        yield path, node
        return
    head, rest = segments[0], segments[1:]
    for key, child in _children(node):
        if _segment_matches(key, head):
            yield from _walk(child, rest, path + (key,))


def search(obj, glob, yielded=False, separator="/", afilter=None, dirs=True):
    segments = _split(glob, separator)
    found = [(p, v) for p, v in _walk(obj, segments) if afilter is None or afilter(v)]
    if yielded:
        return ((separator.join(str(k) for k in p), v) for p, v in found)
    result = {}
    for p, v in found:
        _set_path(result, list(p), v, create_lists=isinstance(obj, list))
    return result


def values(obj, glob, separator="/", afilter=None, dirs=True):
    return [v for _, v in _walk(obj, _split(glob, separator)) if afilter is None or afilter(v)]


def get(obj, glob, separator="/", default=_MISSING):
    segments = _split(glob, separator)
    if segments == ["*"] or not segments:
        if not segments:
            return obj
    found = list(_walk(obj, segments))
    if not found:
        if default is not _MISSING:
            return default
        raise KeyError(glob)
    if len(found) > 1:
        raise ValueError(f"dpath.get() globs must match only one leaf: {glob}")
    return found[0][1]


def _set_path(obj, segments, value, create_lists=True):
    node = obj
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if isinstance(node, list):
            seg = int(seg)
            while len(node) <= seg:
                node.append(None)
            if last:
                node[seg] = value
            elif node[seg] is None:
                node[seg] = [] if _is_index(segments[i + 1]) and create_lists else {}
            if not last:
                node = node[seg]
        else:
            if last:
                node[seg] = value
            else:
                if seg not in node or node[seg] is None:
                    node[seg] = [] if _is_index(segments[i + 1]) and create_lists else {}
                node = node[seg]
    return obj


def _is_index(segment):
    # dpath creates a list for an int segment (and for a string of digits)
    return isinstance(segment, int) or (isinstance(segment, str) and segment.isdigit())


def new(obj, path, value, separator="/", creator=None):
    """Set value at path, creating the mappings (or lists, for int segments) on the way."""
    segments = _split(path, separator)
    for s in segments:
        if isinstance(s, str) and any(c in s for c in "*?["):
            raise InvalidGlob(f"dpath.new() path must not be a glob: {path}")
    return _set_path(obj, segments, value)


def set(obj, glob, value, separator="/", afilter=None):
    """Replace the value of every existing leaf matched by glob; return how many changed."""
    changed = 0
    for p, v in list(_walk(obj, _split(glob, separator))):
        if afilter is None or afilter(v):
            _set_path(obj, list(p), value)
            changed += 1
    return changed


def delete(obj, glob, separator="/", afilter=None):
    found = list(_walk(obj, _split(glob, separator)))
    if not found:
        raise PathNotFound(f"Could not find {glob} to delete it")
    for p, v in reversed(found):
        parent = obj
        for k in p[:-1]:
            parent = parent[k]
        del parent[p[-1]]
    return len(found)
