"""unidecode for Latin-script text: Unicode decomposition drops the accents (é -> e), a small table
covers letters that do not decompose (ß, æ, ø, ł, ...). The real package transliterates every
script; for a character outside this table the shim raises, naming it, rather than guess."""

import unicodedata

_TABLE = {
    "ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D",
    "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "ı": "i", "ŋ": "ng", "Ŋ": "NG", "ħ": "h", "Ħ": "H",
    "‘": "'", "’": "'", "‚": ",", "“": '"', "”": '"', "„": ",,", "–": "-", "—": "--", "…": "...", "«": "<<", "»": ">>",
    "€": "EUR", "£": "PS", "¥": "Y=", "©": "(c)", "®": "(r)", "°": "deg", "×": "x", "÷": "/", "•": "*", "·": "*",
    "\u00a0": " ", "¿": "?", "¡": "!", "§": "SS", "¶": "P", "µ": "u", "½": " 1/2", "¼": " 1/4", "¾": " 3/4",
}


class UnidecodeError(ValueError):
    def __init__(self, message, index=None):
        super().__init__(message)
        self.index = index


def unidecode(string: str, errors: str = "strict", replace_str: str = "?") -> str:
    out = []
    for index, ch in enumerate(string):
        if ord(ch) < 128:
            out.append(ch)
        elif ch in _TABLE:
            out.append(_TABLE[ch])
        else:
            base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
            if base and all(ord(c) < 128 for c in base):
                out.append(base)
            elif errors == "ignore":
                continue
            elif errors == "replace":
                out.append(replace_str)
            else:
                raise UnidecodeError(f"unidecode shim: no transliteration for {ch!r} (U+{ord(ch):04X}) outside Latin script", index)
    return "".join(out)


unidecode_expect_ascii = unidecode
unidecode_expect_nonascii = unidecode
