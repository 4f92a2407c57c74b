"""xmltodict.parse over the standard library's expat, as xmltodict itself builds on expat: an
element becomes a dict of its attributes (attr_prefix) and children, repeated children a list,
text alone a string, text beside children or attributes the cdata_key; force_list names
elements that are always lists. Namespaces stay as written (no process_namespaces)."""

from xml.parsers import expat


class _Handler:
    def __init__(self, attr_prefix, cdata_key, force_list, dict_constructor, strip_whitespace, cdata_separator):
        self.attr_prefix = attr_prefix
        self.cdata_key = cdata_key
        self.force_list = force_list
        self.dict_constructor = dict_constructor
        self.strip_whitespace = strip_whitespace
        self.cdata_separator = cdata_separator
        self.stack = []
        self.item = None
        self.data = []
        self.path = []

    def _forced(self, key, value):
        if not self.force_list:
            return False
        if isinstance(self.force_list, bool):
            return self.force_list
        if callable(self.force_list):
            return self.force_list(self.path[:-1], key, value)
        return key in self.force_list

    def start(self, name, attrs):
        self.path.append(name)
        self.stack.append((self.item, self.data))
        attr_entries = [(self.attr_prefix + k, v) for k, v in (attrs.items() if isinstance(attrs, dict) else zip(attrs[0::2], attrs[1::2]))]
        self.item = self.dict_constructor(attr_entries) if attr_entries else None
        self.data = []

    def end(self, name):
        data = self.cdata_separator.join(self.data) if self.data else None
        if data is not None and self.strip_whitespace:
            data = data.strip() or None
        item = self.item
        if item is not None and data is not None:
            item[self.cdata_key] = data
        value = item if item is not None else data
        parent, parent_data = self.stack.pop()
        self.item, self.data = parent, parent_data
        if self.item is None:
            self.item = self.dict_constructor()
        self._push(self.item, name, value)
        self.path.pop()

    def _push(self, item, key, value):
        if key in item:
            existing = item[key]
            if isinstance(existing, list):
                existing.append(value)
            else:
                item[key] = [existing, value]
        else:
            item[key] = [value] if self._forced(key, value) else value

    def characters(self, data):
        self.data.append(data)


def parse(xml_input, encoding=None, expat=expat, process_namespaces=False, namespace_separator=":", disable_entities=True,
          process_comments=False, attr_prefix="@", cdata_key="#text", force_cdata=False, cdata_separator="",
          postprocessor=None, dict_constructor=dict, strip_whitespace=True, force_list=None, item_depth=0, **kwargs):
    if process_namespaces or postprocessor or item_depth or force_cdata:
        raise NotImplementedError("xmltodict shim: process_namespaces, postprocessor, item_depth and force_cdata are not supported")
    handler = _Handler(attr_prefix, cdata_key, force_list, dict_constructor, strip_whitespace, cdata_separator)
    parser = expat.ParserCreate(encoding)
    parser.ordered_attributes = False
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    parser.CharacterDataHandler = handler.characters
    parser.buffer_text = True
    if disable_entities:
        parser.DefaultHandler = lambda x: None
        parser.ExternalEntityRefHandler = lambda *x: 1
    if isinstance(xml_input, str):
        xml_input = xml_input.encode(encoding or "utf-8")
    if hasattr(xml_input, "read"):
        parser.ParseFile(xml_input)
    else:
        parser.Parse(xml_input, True)
    return handler.item
