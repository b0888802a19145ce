"""Declarative Kafka message schemas and the one codec that reads and writes them.

Every API is described once, for all of its versions, in ``kbroker/protocol/apis/<name>.py``::

    from kbroker.protocol.schema import Api, Field as F

    API = Api(
        key=0, name="Produce", valid="0-9", flexible="9+",
        request=[
            F("transactional_id", "string", "3+", nullable="3+", default=None),
            F("acks", "int16"),
            F("timeout_ms", "int32"),
            F("topic_data", "[]", fields=[
                F("name", "string"),
                F("partition_data", "[]", fields=[
                    F("index", "int32"),
                    F("records", "records", nullable="0+"),
                ]),
            ]),
        ],
        response=[...],
    )

Field types: ``int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records``; ``"[]"`` is an array of
structs (``fields=`` required), ``"[]int32"`` / ``"[]string"`` an array of a primitive, ``"{}"`` a nested struct.
Version ranges use Kafka's notation: ``"0+"``, ``"3-5"``, ``"4"``, ``"none"``. ``tag=N`` makes a field a tagged field
(it is only ever written in flexible versions, and only when its value differs from the default).

Wire rules (Kafka protocol guide, KIP-482): in flexible versions ``string``/``bytes``/``records``/arrays use the
compact forms (unsigned varint of length+1, 0 = null) and every struct ends with a tagged-field section
(uvarint count, then per field uvarint tag, uvarint size, bytes); unknown tags are skipped.

Decoded messages are plain ``dict`` objects holding *every* field of the schema: fields absent from the version take
their default, so handlers read any version the same way. ``records`` decode to a zero-copy ``memoryview`` slice of
the request buffer. Encoding writes into a ``Writer`` whose ``parts`` are ``bytearray`` chunks and, for ``records``
values that are ``FileRegion``-like (have ``.size``, ``.fileno()`` and ``.read_bytes()``), the region itself, so the
connection can ``sendfile`` record bytes straight from a segment file.

Hostile input (issue 8): decoding costs Python time and memory per *element*, not per byte -- a 4 MB Metadata request
naming 2 M empty topic names used to take 10 s and ~1 GB. Two bounds make a request's decode cost bounded before any
of it is spent on the elements:

* per array: ``count x minimal wire size of one element`` must fit in the bytes left (``_min_size``; Kafka only
  checks 1 byte per element), so a lying count is refused before a single element is decoded;
* per request: ``decode_request(..., max_elements=N)`` refuses a request with more than N array elements and tagged
  fields in total, at any depth (``ElementLimitError``, a ``SchemaError``: the server closes the connection as for
  any request that fails to parse). The broker passes ``request.max.elements``.
"""
import struct
import threading
import uuid as _uuid

from kbroker._native import decode_uvarint, encode_uvarint

MAX_VERSION = 0x7FFF
_MISSING = object()


class SchemaError(ValueError):
    """A message did not match its schema (truncated, bad length, bad UTF-8, ...)."""


class ElementLimitError(SchemaError):
    """A message has more array elements + tagged fields than the decode was allowed (``max_elements``)."""


UNLIMITED = 1 << 62


class _ElementBudget(threading.local):
    """Elements the decode in progress on this thread may still read, and its ``pause`` (below). ``Api.decode_request``
    sets them and restores the previous values (UNLIMITED / None outside a limited decode). A pause empties the slot
    while it yields and puts the paused decode's values back after: greenlets share it when gevent has not patched
    threading, and a decode that began meanwhile must neither inherit the paused one's values nor restore them when
    it ends."""
    left = UNLIMITED
    limit = UNLIMITED
    pause = None


_budget = _ElementBudget()

# Long arrays let the event loop serve others (issue 8: no request may hold it ~100 ms): a decode or encode given
# ``pause`` (the server passes a time slice's ``tick``) calls it every PAUSE_EVERY elements of an array longer than
# that. Shorter arrays -- every request of a normal client -- pay nothing; 100,000 values decode in ~50 ms.
PAUSE_EVERY = 1024


def _pause_point():
    b = _budget
    mine = b.left, b.limit, b.pause
    b.left, b.limit, b.pause = UNLIMITED, UNLIMITED, None
    try:
        mine[2]()
    finally:
        b.left, b.limit, b.pause = mine


def _spend(n, what):
    """Charge ``n`` elements to the decode in progress; ElementLimitError past its limit."""
    b = _budget
    left = b.left - n
    if left < 0:
        raise ElementLimitError("more than %d array elements and tagged fields in one message (at %s)"
                                % (b.limit, what))
    b.left = left


def parse_versions(spec):
    """'0+' -> (0, MAX), '3-5' -> (3, 5), '4' -> (4, 4), 'none'/None -> None."""
    if spec is None or spec == "none":
        return None
    spec = str(spec)
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


class Field:
    __slots__ = ("name", "type", "versions", "nullable", "default", "fields", "tag", "about")

    def __init__(self, name, type, versions="0+", nullable="none", default=_MISSING, fields=None, tag=None,
                 about=""):
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.fields = fields
        self.tag = tag
        self.about = about
        if type in ("[]", "{}") and not fields:
            raise ValueError("field %s: %s needs fields=" % (name, type))
        self.default = _default_for(type) if default is _MISSING else default

    def __repr__(self):
        return "Field(%r, %r)" % (self.name, self.type)


def _default_for(t):
    if t.startswith("["):
        return []
    if t == "{}":
        return _MISSING  # filled lazily with the nested struct's defaults
    return {"bool": False, "string": "", "bytes": b"", "records": None, "uuid": b"\x00" * 16,
            "float64": 0.0}.get(t, 0)


# ---------------------------------------------------------------------------------------------- primitive codecs

_FIXED = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"),
}
_I16 = _FIXED["int16"]
_I32 = _FIXED["int32"]
# Fixed-size types as struct format codes: consecutive fields of these are read (and written) with one
# unpack_from (pack) call, and arrays of them whole ('?' reads any non-zero byte as true, as ``_dec_bool``).
_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I", "float64": "d",
          "bool": "?"}


def _fixed_decoder(st):
    unpack_from, size = st.unpack_from, st.size

    def dec(buf, pos):
        if pos + size > len(buf):
            raise SchemaError("truncated")
        return unpack_from(buf, pos)[0], pos + size
    return dec


def _fixed_encoder(st):
    pack = st.pack

    def enc(w, v):
        w.buf += pack(v)
    return enc


def _dec_bool(buf, pos):
    if pos >= len(buf):
        raise SchemaError("truncated")
    return buf[pos] != 0, pos + 1


def _enc_bool(w, v):
    w.buf.append(1 if v else 0)


def _dec_uuid(buf, pos):
    if pos + 16 > len(buf):
        raise SchemaError("truncated")
    return bytes(buf[pos:pos + 16]), pos + 16


def _enc_uuid(w, v):
    if isinstance(v, _uuid.UUID):
        v = v.bytes
    if len(v) != 16:
        raise SchemaError("uuid must be 16 bytes")
    w.buf += v


def _length_decoder(compact, width_struct):
    """Reads a length prefix; returns (length or -1 for null, new pos)."""
    if compact:
        def rd(buf, pos):
            if pos < len(buf) and buf[pos] < 0x80:     # a one-byte uvarint: every length up to 126
                return buf[pos] - 1, pos + 1
            try:
                n, pos = decode_uvarint(buf, pos)
            except ValueError as e:
                raise SchemaError(str(e))
            return n - 1, pos
    else:
        unpack_from, size = width_struct.unpack_from, width_struct.size

        def rd(buf, pos):
            if pos + size > len(buf):
                raise SchemaError("truncated")
            return unpack_from(buf, pos)[0], pos + size
    return rd


def _length_writer(compact, width_struct):
    if compact:
        def wr(w, n):
            if 0 <= n + 1 < 0x80:                       # a one-byte uvarint (null, 0 and lengths up to 126)
                w.buf.append(n + 1)
            else:
                w.buf += encode_uvarint(n + 1)
    else:
        pack = width_struct.pack

        def wr(w, n):
            w.buf += pack(n)
    return wr


def _blob_decoder(kind, compact, nullable):
    rd = _length_decoder(compact, _I16 if kind == "string" else _I32)

    def dec(buf, pos):
        n, pos = rd(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise SchemaError("null or negative length for non-nullable %s" % kind)
        end = pos + n
        if end > len(buf):
            raise SchemaError("truncated %s (%d bytes declared)" % (kind, n))
        if kind == "string":
            try:
                return str(buf[pos:end], "utf-8"), end
            except UnicodeDecodeError:
                raise SchemaError("invalid UTF-8 string")
        if kind == "records":
            return buf[pos:end], end
        return bytes(buf[pos:end]), end
    return dec


def _blob_encoder(kind, compact, nullable):
    wr = _length_writer(compact, _I16 if kind == "string" else _I32)

    def enc(w, v):
        if v is None:
            if not nullable:
                raise SchemaError("null value for non-nullable %s" % kind)
            wr(w, -1)
            return
        if kind == "string":
            v = v.encode("utf-8")
        elif kind == "records" and hasattr(v, "read_bytes"):
            wr(w, v.size)
            w.add_region(v)
            return
        wr(w, len(v))
        w.buf += v
    return enc


_SIMPLE_DEC = {"bool": _dec_bool, "uuid": _dec_uuid}
_SIMPLE_ENC = {"bool": _enc_bool, "uuid": _enc_uuid}
for _t, _st in _FIXED.items():
    _SIMPLE_DEC[_t] = _fixed_decoder(_st)
    _SIMPLE_ENC[_t] = _fixed_encoder(_st)


class Writer:
    """Output of the encoder: ``parts`` is a list of bytearrays and file regions, in wire order."""
    __slots__ = ("buf", "parts")

    def __init__(self):
        self.buf = bytearray()
        self.parts = [self.buf]

    def add_region(self, region):
        self.parts.append(region)
        self.buf = bytearray()
        self.parts.append(self.buf)

    def chunks(self):
        return [p for p in self.parts if (len(p) if isinstance(p, bytearray) else p.size)]

    def size(self):
        return sum(len(p) if isinstance(p, bytearray) else p.size for p in self.parts)

    def getvalue(self):
        """All bytes (reads file regions); for tests and small messages."""
        out = bytearray()
        for p in self.parts:
            out += p if isinstance(p, bytearray) else p.read_bytes()
        return bytes(out)


# ------------------------------------------------------------------------------------------- struct compilation

class _Compiled:
    __slots__ = ("decode", "encode", "copy", "defaults", "min_size", "values")


class Encoded(bytes):
    """One struct's bytes, encoded beforehand with ``Api.encode_element`` for the same message, version and field:
    given in place of that struct's dict, they are written as they are. For answers repeated unchanged across
    requests (a Metadata topic entry: 1,000 partitions are ~1 ms of encoding, the same bytes each time)."""
    __slots__ = ()


def _copy_default(v):
    return list(v) if isinstance(v, list) else (dict(v) if isinstance(v, dict) else v)


def _compile_fields(fields, version, flexible):
    """Build (decode(buf,pos)->(dict,pos), encode(w,dict), copy(dict)->dict, defaults, min_size) for a struct at
    one version (``copy``: what decoding the encoded dict gives, without the bytes; ``Api.copy_request``).

    ``min_size`` is the fewest bytes the struct can take on the wire (its regular fields' minimal sizes plus the
    empty tagged-field section): the per-array bound of ``dec_array``.

    The two functions are generated for the struct's fields at this version (``_struct_source``): straight-line
    code with each run of consecutive fixed-size fields read or written by one struct call. The loop over
    (name, decoder) pairs it replaces cost ~7.7 us per LeaderAndIsr partition state (54 ms for 7,000, a tenth of
    a failover survivor's samples at 27,000 partitions)."""
    regular = []   # (name, dec, enc, default, struct code or None, copier or None)
    tagged = {}    # tag -> (name, dec, enc, default, copier or None)
    defaults = {}
    for f in fields:
        dec, enc, default, cp = _compile_field(f, version, flexible)
        defaults[f.name] = default
        if not _in(f.versions, version):
            continue
        if f.tag is not None:
            if flexible:
                tagged[f.tag] = (f.name, dec, enc, default, cp)
            continue
        regular.append((f.name, dec, enc, default, _CODES.get(f.type), cp))
    tag_order = sorted(tagged.items())
    # Decoding writes every regular field, so only the others need their defaults: the immutable ones are copied
    # with the dict in one C call, the lists/dicts get a fresh copy each (a handler may mutate its request).
    decoded = {r[0] for r in regular}
    static = {k: v for k, v in defaults.items() if k not in decoded and not isinstance(v, (list, dict))}
    fresh = [(k, v) for k, v in defaults.items() if k not in decoded and isinstance(v, (list, dict))]

    def encode_tagged(w, d):
        get = d.get
        present = []
        for tag, (name, _, enc, default, _) in tag_order:
            v = get(name, default)
            if v != default:
                present.append((tag, enc, v))
        w.buf += encode_uvarint(len(present))
        for tag, enc, v in present:
            sub = Writer()
            enc(sub, v)
            body = sub.getvalue()
            w.buf += encode_uvarint(tag)
            w.buf += encode_uvarint(len(body))
            w.buf += body

    namespace = {"static": static, "fresh": fresh, "_copy_default": _copy_default, "SchemaError": SchemaError,
                 "_read_tagged": _read_tagged, "tagged": tagged, "encode_tagged": encode_tagged,
                 "Encoded": Encoded, "tag_copy": [(name, default, cp) for _, (name, _, _, default, cp) in tag_order]}
    source = _struct_source(regular, bool(fresh), flexible, namespace)
    code = _CODE.get(source)
    if code is None:        # compiling is ~0.8 ms; most structs repeat across versions and messages
        code = _CODE[source] = compile(source, "<kbroker.protocol.schema struct>", "exec")
    exec(code, namespace)   # noqa: S102 -- generated from our own schemas (see _struct_source)
    c = _Compiled()
    c.decode, c.encode, c.copy, c.defaults = namespace["decode"], namespace["encode"], namespace["copy"], defaults
    c.min_size = _struct_min_size(fields, version, flexible)
    c.values = _struct_values(fields, version)
    return c


_CODE = {}      # generated source -> its code object


def _struct_source(regular, has_fresh, flexible, ns):
    """Source of ``decode(buf, pos)``, ``encode(w, d)`` and ``copy(d)`` for one struct; ``ns`` gets the objects
    it names.

    The source holds only the struct's shape -- its runs' sizes, and names of ``ns`` (field names are ``ns``
    values too, ``name_K``) -- so structs of one shape share one compiled code object (``_CODE``). For fields a,
    b (int32) then c (a string)::

        def decode(buf, pos):
            d = static.copy()
            if pos + 8 > len(buf): raise SchemaError("truncated")
            d[name_0], d[name_1], = unpack_0(buf, pos); pos += 8
            d[name_2], pos = dec_2(buf, pos)
            return d, pos
    """
    dec = ["def decode(buf, pos):", "    d = static.copy()"]
    enc = ["def encode(w, d):", "    if d.__class__ is Encoded:", "        w.buf += d", "        return",
           "    get = d.get"]
    cp = ["def copy(src):", "    if src.__class__ is Encoded:", "        return decode(src, 0)[0]",
          "    d = static.copy()"]
    if has_fresh:
        dec += ["    for name, v in fresh:", "        d[name] = _copy_default(v)"]
        cp += ["    for name, v in fresh:", "        d[name] = _copy_default(v)"]
    cp.append("    get = src.get")
    for k, r in enumerate(regular):
        ns["name_%d" % k], ns["default_%d" % k] = r[0], r[3]
        if r[5] is None:                            # immutable: the value itself
            cp.append("    d[name_%d] = get(name_%d, default_%d)" % (k, k, k))
        else:
            ns["copy_%d" % k] = r[5]
            cp.append("    d[name_%d] = copy_%d(get(name_%d, default_%d))" % (k, k, k, k))
    i = 0
    while i < len(regular):
        j = i
        while j < len(regular) and regular[j][4] is not None:
            j += 1
        if j > i:                                   # fields i..j-1: one fixed-size run
            st = struct.Struct(">" + "".join(r[4] for r in regular[i:j]))
            ns["unpack_%d" % i], ns["pack_%d" % i] = st.unpack_from, st.pack
            targets = ", ".join("d[name_%d]" % k for k in range(i, j))
            dec += ["    if pos + %d > len(buf):" % st.size, "        raise SchemaError('truncated')",
                    "    %s, = unpack_%d(buf, pos)" % (targets, i), "    pos += %d" % st.size]
            args = []
            for k in range(i, j):
                ns["name_%d" % k], ns["default_%d" % k] = regular[k][0], regular[k][3]
                args.append("get(name_%d, default_%d)" % (k, k))
            enc.append("    w.buf += pack_%d(%s)" % (i, ", ".join(args)))
            i = j
            continue
        name, fdec, fenc, default, _, _ = regular[i]
        ns["dec_%d" % i], ns["enc_%d" % i], ns["default_%d" % i], ns["name_%d" % i] = fdec, fenc, default, name
        dec.append("    d[name_%d], pos = dec_%d(buf, pos)" % (i, i))
        enc.append("    enc_%d(w, get(name_%d, default_%d))" % (i, i, i))
        i += 1
    if flexible:
        dec.append("    pos = _read_tagged(buf, pos, d, tagged)")
        enc.append("    encode_tagged(w, d)")
        # a tagged field is on the wire only when it differs from its default (encode_tagged)
        cp += ["    for name, default, cp in tag_copy:", "        v = get(name, default)", "        if v != default:",
               "            d[name] = v if cp is None else cp(v)"]
    dec.append("    return d, pos")
    cp.append("    return d")
    return "\n".join(dec + enc + cp) + "\n"


def _min_size(f, version, flexible):
    """Fewest wire bytes field ``f`` takes at ``version`` (0 for a tagged field: it may be absent)."""
    if f.tag is not None:
        return 0
    if f.type == "{}":
        return _struct_min_size(f.fields, version, flexible)
    return _type_min_size(f.type, flexible)


def _struct_min_size(fields, version, flexible):
    return sum(_min_size(f, version, flexible) for f in fields if _in(f.versions, version)) + (1 if flexible else 0)


def _struct_values(fields, version):
    """Values one struct decodes into besides its arrays' elements: a field each, nested structs' fields too
    (what ``dec_array`` charges per struct element, plus one for the element itself)."""
    n = 0
    for f in fields:
        if f.tag is None and _in(f.versions, version):
            n += 1 + (_struct_values(f.fields, version) if f.type == "{}" else 0)
    return n


def _type_min_size(t, flexible):
    if t in _FIXED:
        return _FIXED[t].size
    if t == "bool":
        return 1
    if t == "uuid":
        return 16
    if flexible:
        return 1          # compact length (uvarint), 0 = null
    if t == "string":
        return 2          # int16 length
    return 4              # int32 length of bytes, records and arrays


def _read_tagged(buf, pos, d, tagged):
    try:
        count, pos = decode_uvarint(buf, pos)
        if not count:
            return pos
        # each tagged field is at least 2 bytes (tag, size): a larger count is a lie, refused before the loop
        if count > (len(buf) - pos) // 2:
            raise SchemaError("tagged field count %d exceeds message" % count)
        _spend(count, "tagged fields")
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        for _ in range(count):
            tag, pos = decode_uvarint(buf, pos)
            size, pos = decode_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise SchemaError("truncated tagged field")
            entry = tagged.get(tag)
            if entry is not None:
                # decode from a view that ends with the field: it cannot read past its declared size
                d[entry[0]], _ = entry[1](view[:end], pos)
            pos = end
    except (ValueError, OverflowError) as e:
        if isinstance(e, SchemaError):
            raise
        raise SchemaError(str(e))
    return pos


def _compile_field(f, version, flexible):
    """(decoder, encoder, default) for one field at one version."""
    t = f.type
    nullable = _in(f.nullable, version)
    compact = flexible
    if t == "{}":
        sub = _compile_fields(f.fields, version, flexible)
        default = dict(sub.defaults) if f.default is _MISSING else f.default
        return sub.decode, sub.encode, default, sub.copy
    if t.startswith("["):
        elem = t[2:]
        code = _CODES.get(elem) if elem else None
        if code is not None:
            return _fixed_array_codec(f.name, code, compact, nullable) + (
                None if (f.default is None) else list(f.default), _copy_list)
        if elem:
            edec, eenc = _primitive(elem, compact, False)
            ecopy = _copy_blob if elem in ("bytes", "records") else None
        else:
            sub = _compile_fields(f.fields, version, flexible)
            edec, eenc, ecopy = sub.decode, sub.encode, sub.copy
        rd = _length_decoder(compact, _I32)
        wr = _length_writer(compact, _I32)

        elem_min = max(1, _type_min_size(elem, flexible) if elem else sub.min_size)
        # what one element costs the message's budget: itself, plus each value of its fields for a struct
        elem_values = 1 if elem else 1 + sub.values

        def dec_array(buf, pos):
            n, pos = rd(buf, pos)
            if n < 0:
                if nullable and n == -1:
                    return None, pos
                raise SchemaError("null array %s" % f.name)
            # Refuse before decoding (or allocating) anything: a count whose elements cannot fit in the bytes left
            # is a lie, and every element counts against the message's element budget.
            if n * elem_min > len(buf) - pos:
                raise SchemaError("array %s: %d elements of >= %d bytes exceed the %d bytes left"
                                  % (f.name, n, elem_min, len(buf) - pos))
            if not n:
                return [], pos
            _spend(n * elem_values, "array " + f.name)
            out = []
            append = out.append
            if n > PAUSE_EVERY and _budget.pause is not None:
                for i in range(n):
                    if i and not i % PAUSE_EVERY:
                        _pause_point()
                    v, pos = edec(buf, pos)
                    append(v)
                return out, pos
            for _ in range(n):
                v, pos = edec(buf, pos)
                append(v)
            return out, pos

        def enc_array(w, v):
            if v is None:
                if not nullable:
                    raise SchemaError("null array %s" % f.name)
                wr(w, -1)
                return
            wr(w, len(v))
            if len(v) > PAUSE_EVERY and _budget.pause is not None:
                for i, item in enumerate(v):
                    if i and not i % PAUSE_EVERY:
                        _pause_point()
                    eenc(w, item)
                return
            for item in v:
                eenc(w, item)
        if ecopy is None:
            copy_array = _copy_list
        else:
            def copy_array(v):
                if v is None:
                    return None
                if len(v) > PAUSE_EVERY and _budget.pause is not None:
                    out = []
                    for i, item in enumerate(v):
                        if i and not i % PAUSE_EVERY:
                            _pause_point()
                        out.append(ecopy(item))
                    return out
                return [ecopy(item) for item in v]
        default = None if (f.default is None) else list(f.default)
        return dec_array, enc_array, default, copy_array
    dec, enc = _primitive(t, compact, nullable)
    return dec, enc, f.default, (_copy_blob if t in ("bytes", "records") else None)


def _copy_list(v):
    """An array of immutable elements as ``copy_request`` gives it: a new list (as decoding makes), or None."""
    return None if v is None else list(v)


def _copy_blob(v):
    """A bytes or records value as decoding gives it: bytes (None stays None)."""
    return v if v is None or v.__class__ is bytes else bytes(v)



def _fixed_array_codec(name, code, compact, nullable):
    """(decoder, encoder) of an array of a fixed-size type (``[]int32`` replicas, ISRs, ...): the elements are
    read and written by one struct call (a Struct per length, kept for lengths <= ``_KEEP_STRUCTS``), not one call
    each. Same checks as ``dec_array``: the count must fit in the bytes left, and each element costs the budget
    one value."""
    size = struct.calcsize(code)
    what = "array " + name
    structs = {}
    rd = _length_decoder(compact, _I32)
    wr = _length_writer(compact, _I32)

    def layout(n):
        """A new layout for ``n`` elements (callers look in ``structs`` first), kept when short."""
        st = struct.Struct(">%d%s" % (n, code))
        if n <= _KEEP_STRUCTS:
            structs[n] = st
        return st

    def dec(buf, pos):
        n, pos = rd(buf, pos)
        if n <= 0:
            if not n:
                return [], pos
            if nullable and n == -1:
                return None, pos
            raise SchemaError("null array %s" % name)
        if n * size > len(buf) - pos:
            raise SchemaError("array %s: %d elements of >= %d bytes exceed the %d bytes left"
                              % (name, n, size, len(buf) - pos))
        _spend(n, what)
        return list((structs.get(n) or layout(n)).unpack_from(buf, pos)), pos + n * size

    def enc(w, v):
        if v is None:
            if not nullable:
                raise SchemaError("null array %s" % name)
            wr(w, -1)
            return
        n = len(v)
        wr(w, n)
        if n:
            w.buf += (structs.get(n) or layout(n)).pack(*v)
    return dec, enc


# Struct layouts kept per fixed-size array field: lengths up to replication factors and ISR sizes (a longer array
# builds its layout each time: one call per array, not per element).
_KEEP_STRUCTS = 64


def _primitive(t, compact, nullable):
    if t in _SIMPLE_DEC:
        return _SIMPLE_DEC[t], _SIMPLE_ENC[t]
    if t in ("string", "bytes", "records"):
        return _blob_decoder(t, compact, nullable), _blob_encoder(t, compact, nullable)
    raise ValueError("unknown field type %r" % t)


def decode_limited(decode, buf, pos, max_elements, pause=None):
    """``decode(buf, pos)`` allowed at most ``max_elements`` array elements + tagged fields (ElementLimitError).
    For any compiled decoder, e.g. the coordinator's consumer-protocol structs. ``pause``: see PAUSE_EVERY."""
    b = _budget
    saved = b.left, b.limit, b.pause
    b.left = b.limit = max_elements
    b.pause = pause
    try:
        return decode(buf, pos)
    finally:
        b.left, b.limit, b.pause = saved


def _pausing(pause, fn, *args):
    """``fn(*args)`` with ``pause`` called every PAUSE_EVERY elements of a long array (None: no pauses)."""
    if pause is None:
        return fn(*args)
    b = _budget
    saved = b.pause
    b.pause = pause
    try:
        return fn(*args)
    finally:
        b.pause = saved


# ------------------------------------------------------------------------------------------------------ the API

class Api:
    """One Kafka API: its key, the versions this schema describes, and the request/response fields."""

    def __init__(self, key, name, valid, flexible, request, response):
        self.key = key
        self.name = name
        self.valid = parse_versions(valid)
        self.flexible = parse_versions(flexible)
        self.request_fields = request
        self.response_fields = response
        self._cache = {}

    def is_flexible(self, version):
        return _in(self.flexible, version)

    def request_header_version(self, version):
        if self.is_flexible(version):
            return 2
        if self.key == 7 and version == 0:  # ControlledShutdown v0 has no client_id
            return 0
        return 1

    def response_header_version(self, version):
        # ApiVersions responses always use header v0 so a client can parse them before it knows what we speak.
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def _compiled(self, which, version):
        k = (which, version)
        c = self._cache.get(k)
        if c is None:
            if not _in(self.valid, version):
                raise SchemaError("%s v%d is not described" % (self.name, version))
            fields = self.request_fields if which == "req" else self.response_fields
            c = self._cache[k] = _compile_fields(fields, version, self.is_flexible(version))
        return c

    def decode_request(self, version, buf, pos=0, max_elements=None, pause=None):
        """The request dict. ``max_elements``: most array elements + tagged fields the whole request may hold
        (ElementLimitError beyond); None = bounded by the bytes only. ``pause``: see PAUSE_EVERY."""
        c = self._compiled("req", version)
        if max_elements is None and pause is None:
            return c.decode(buf, pos)[0]
        return decode_limited(c.decode, buf, pos, UNLIMITED if max_elements is None else max_elements, pause)[0]

    def decode_response(self, version, buf, pos=0, pause=None):
        """The response dict. ``pause``: see PAUSE_EVERY."""
        c = self._compiled("resp", version)
        if pause is None:
            return c.decode(buf, pos)[0]
        return decode_limited(c.decode, buf, pos, UNLIMITED, pause)[0]

    def encode_request(self, version, msg, w=None, pause=None):
        """``msg`` appended to ``w`` (a new Writer when None). ``pause``: see PAUSE_EVERY."""
        return self._encode("req", version, msg, w, pause)

    def copy_request(self, version, msg, pause=None):
        """What ``decode_request(version, encode_request(version, msg))`` returns, without the bytes: every field
        of the version (absent ones at their defaults, fields the version lacks dropped), new dicts and lists
        throughout (the receiver may mutate them), tagged fields only when they differ from their defaults,
        ``Encoded`` elements decoded. Values are not range-checked as the encoder does: for messages this process
        built itself (the controller's requests to its own broker: ~1 us a partition state instead of ~5 us).
        ``pause``: see PAUSE_EVERY."""
        return _pausing(pause, self._compiled("req", version).copy, msg)

    def encode_response(self, version, msg, w=None, pause=None):
        """``msg`` appended to ``w`` (a new Writer when None). ``pause``: see PAUSE_EVERY."""
        return self._encode("resp", version, msg, w, pause)

    def encode_element(self, which, version, field, value):
        """``value``, one element of the top-level struct array ``field`` of the request (``which`` "req") or
        response ("resp") at ``version``, encoded on its own: an Encoded to put in that array of a later message
        of the same version."""
        k = (which, version, field)
        c = self._cache.get(k)
        if c is None:
            if not _in(self.valid, version):
                raise SchemaError("%s v%d is not described" % (self.name, version))
            fields = self.request_fields if which == "req" else self.response_fields
            f = next((f for f in fields if f.name == field and f.type == "[]" and _in(f.versions, version)), None)
            if f is None:
                raise SchemaError("%s v%d has no struct array %r" % (self.name, version, field))
            c = self._cache[k] = _compile_fields(f.fields, version, self.is_flexible(version))
        w = Writer()
        c.encode(w, value)
        return Encoded(w.getvalue())

    def _encode(self, which, version, msg, w, pause):
        w = w or Writer()
        _pausing(pause, self._compiled(which, version).encode, w, msg)
        return w

    def __repr__(self):
        return "Api(%d, %s)" % (self.key, self.name)
