"""A list of records as JSON, one record per line, fast: `--json` writes ~10^5 wait states and
instances per 10^6 events.

With orjson (a dependency; about 14x the C encoder's speed on these rows) the whole chunk is
encoded at once and cut into lines where one record ends and the next begins.  Its text differs from
the json module's only in spelling (`6.2e-05` is `0.000062`, `1e-06` is `1e-6`): every value
reads back the same.  Where orjson would change a value or the text's character set, the chunk goes
the json module's way: non-finite floats (orjson writes null, json NaN/Infinity: any "null" in
orjson's text sends the chunk there), non-ASCII text (json escapes it), values orjson refuses.

Without orjson: records of one shape (dicts with the same keys in the same order, or lists of
one length) are encoded one column at a time -- floats and ints by their repr, which is what the C
encoder writes for finite floats and plain ints, strings and repeated objects once per distinct
object, each row filled into one %-template -- the C encoder's text byte for byte, ~1.2x its speed
(the floats' repr is most of the time)."""
from __future__ import annotations

import json
import math
from operator import itemgetter

try:
    import orjson
except ImportError:                       # an environment without it: the json module's text
    orjson = None

ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def encode_lines(rows: list, pad: str) -> str:
    """",\\n".join(pad + ENCODE(row) for row in rows), or the same values as orjson spells them."""
    text = _orjson_lines(rows, pad) if orjson is not None else None
    if text is None:
        text = ",\n".join(pad + r for r in encode_rows(rows))
    return text


def _orjson_lines(rows: list, pad: str) -> str | None:
    """The rows encoded by orjson and cut at the record boundaries, or None where its text would
    not read back as the json module's (see the module's docstring) or cannot be cut safely."""
    if not rows or not all(type(r) is dict for r in rows):
        return None
    try:
        data = orjson.dumps(rows)
    except (TypeError, ValueError):       # orjson.JSONEncodeError: non-str keys, huge ints, ...
        return None
    if not data.isascii() or b"null" in data:
        return None
    text = data.decode("ascii")[1:-1]
    # "},{" ends one record and starts the next; inside a record (a nested list of dicts, a string)
    # it would cut wrongly, which the count tells
    if text.count("},{") != len(rows) - 1:
        return None
    return pad + text.replace("},{", "},\n" + pad + "{")


def encode_rows(rows: list) -> list[str]:
    """ENCODE(row) for every row, column by column where the rows have one shape."""
    template = _template(rows)
    if template is None:
        return [ENCODE(r) for r in rows]
    fmt, getters = template
    cols = [_encode_column(list(map(get, rows))) for get in getters]
    return [fmt % t for t in zip(*cols)]


def _template(rows: list):
    """(%-template, one getter per column) when every row has the first row's shape, else None."""
    if not rows:
        return None
    first = rows[0]
    if type(first) is dict and first and all(type(k) is str for k in first):
        keys = tuple(first)
        if not all(type(r) is dict and tuple(r) == keys for r in rows):
            return None
        fmt = "{" + ",".join(ENCODE(k).replace("%", "%%") + ":%s" for k in keys) + "}"
        return fmt, [itemgetter(k) for k in keys]
    if type(first) is list and first:
        n = len(first)
        if not all(type(r) is list and len(r) == n for r in rows):
            return None
        return "[" + ",".join(["%s"] * n) + "]", [itemgetter(i) for i in range(n)]
    return None


def _encode_column(col: list) -> list[str]:
    kinds = set(map(type, col))
    if kinds == {float} and all(map(math.isfinite, col)):
        return list(map(float.__repr__, col))
    if kinds == {int}:
        return list(map(int.__repr__, col))
    # strings, dicts, lists, None, bools, mixed: the encoder once per distinct object (rows share
    # their call path's strings and "where"; the objects live as long as the rows)
    memo: dict[int, str] = {}
    out = []
    for v in col:
        s = memo.get(id(v))
        if s is None:
            s = memo[id(v)] = ENCODE(v)
        out.append(s)
    return out
