"""One blocking TCP connection to one broker, speaking Kafka's wire protocol through kbroker's own codec.

Plain ``socket`` objects (the CLI tools never monkey-patch), one request in flight at a time.

Lifecycle: connect, then ApiVersions **v0** (the one version every broker answers; its response always uses
response header v0) and remember the broker's ``{api_key: (min, max)}``. ``request()`` then picks, unless told,
the highest version in ``our schema's valid range`` intersected with ``the broker's range``; no overlap raises
``UnsupportedVersion`` (error 35) naming the API and both ranges.

Wire: every request is ``int32 size | request header | body``; the header version (0, 1 or 2) and the response
header version (0 or 1) come from ``Api.request_header_version`` / ``Api.response_header_version``. Correlation
ids count up from 1; a response whose id differs from the request's is a protocol error (the connection is closed,
``NetworkException`` raised), as is an EOF or a response frame above ``MAX_RESPONSE`` bytes.
Produce with ``acks=0`` has no response at all: ``request(..., expect_response=False)`` returns None.

Security: ``security`` (``kbroker/security/client_channel.py`` ChannelSecurity, e.g. from ``--command-config``'s
client properties) secures the socket -- TLS handshake, then SASL -- before the ApiVersions; a failure raises
``NetworkException`` saying which step failed (a refused certificate, failed SASL credentials).
"""
import socket
import struct

from kbroker import errors
from kbroker.protocol.apis import APIS, BY_NAME
from kbroker.protocol.headers import decode_response_header, encode_request_header
from kbroker.security.client_channel import ChannelError, secure

API_VERSIONS_KEY = 18

# Responses larger than this are refused before allocation: a Fetch answer is bounded by the request's max_bytes
# (the console consumer asks for <= 50 MiB, Kafka's fetch.max.bytes), so 256 MiB only trips on garbage.
MAX_RESPONSE = 256 << 20

_SIZE = struct.Struct(">i")

# The security of connections opened without one: the tools' ``--command-config`` sets it for their process
# (kbroker/client/client_config.py); None = PLAINTEXT.
DEFAULT_SECURITY = None


def resolve_api(api_name_or_key):
    """The ``Api`` schema for a key (int) or a name ("Metadata"); KeyError for unknown ones."""
    if isinstance(api_name_or_key, int):
        return APIS[api_name_or_key]
    return BY_NAME[api_name_or_key]


def parse_host_port(s):
    """'host:port' -> (host, port); '[::1]:9092' for IPv6. ValueError when malformed."""
    s = s.strip()
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, sep, port = s.rpartition(":")
        if not sep:
            raise ValueError("expected HOST:PORT, got %r" % s)
    if not host or not port.isdigit():
        raise ValueError("expected HOST:PORT, got %r" % s)
    return host, int(port)


class BrokerConnection:
    def __init__(self, host, port, client_id="kbroker-admin", timeout=30, security=None):
        self.host = host
        self.port = int(port)
        self.client_id = client_id
        self.timeout = timeout
        self._correlation_id = 0
        self.api_ranges = {}
        self.last_version = None  # version of the last request sent (callers normalise old-version answers)
        try:
            sock = socket.create_connection((host, self.port), timeout=timeout)
        except OSError as e:
            raise errors.NetworkException("cannot connect to %s:%d: %s" % (host, self.port, e)) from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock = secure(sock, host, security if security is not None else DEFAULT_SECURITY, timeout,
                               client_id)
        except ChannelError as e:
            raise errors.NetworkException("cannot connect to %s:%d: %s" % (host, self.port, e)) from None
        try:
            resp = self.request(API_VERSIONS_KEY, {}, version=0)
        except Exception:
            self.close()
            raise
        if resp["error_code"]:
            self.close()
            raise errors.error_for_code(resp["error_code"])(
                "ApiVersions v0 to %s:%d failed: %s" % (host, self.port, errors.error_name(resp["error_code"])))
        self.api_ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}

    def __repr__(self):
        return "BrokerConnection(%s:%d)" % (self.host, self.port)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------------------------------ versions

    def pick_version(self, api, max_version=None):
        """Highest version both we (schema ``valid``) and the broker (ApiVersions) speak, capped at ``max_version``."""
        ours = api.valid
        theirs = self.api_ranges.get(api.key)
        if theirs is None:
            raise errors.UnsupportedVersion("broker %s:%d does not support %s (api key %d)"
                                            % (self.host, self.port, api.name, api.key))
        lo = max(ours[0], theirs[0])
        hi = min(ours[1], theirs[1])
        if max_version is not None:
            hi = min(hi, max_version)
        if lo > hi:
            raise errors.UnsupportedVersion(
                "no common version of %s: client %d-%d, broker %d-%d%s"
                % (api.name, ours[0], ours[1], theirs[0], theirs[1],
                   "" if max_version is None else ", capped at %d" % max_version))
        return hi

    # ------------------------------------------------------------------------------------------ requests

    def request(self, api_name_or_key, body, version=None, expect_response=True, max_version=None):
        """Send one request and return the decoded response dict (None when ``expect_response`` is False)."""
        api = resolve_api(api_name_or_key)
        if version is None:
            version = self.pick_version(api, max_version)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        corr = self._correlation_id
        header = encode_request_header(api.request_header_version(version), api.key, version, corr, self.client_id)
        payload = bytes(header) + api.encode_request(version, body).getvalue()
        self._sendall(_SIZE.pack(len(payload)) + payload)
        if not expect_response:
            return None
        frame = self._read_frame()
        got, pos = decode_response_header(frame, api.response_header_version(version))
        if got != corr:
            self.close()
            raise errors.NetworkException("%s v%d: correlation id %d in response, expected %d"
                                          % (api.name, version, got, corr))
        self.last_version = version
        return api.decode_response(version, frame, pos)

    def _sendall(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.close()
            raise errors.NetworkException("send to %s:%d failed: %s" % (self.host, self.port, e)) from e

    def _recv_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self.sock.recv_into(view[got:], n - got)
            except OSError as e:
                self.close()
                raise errors.NetworkException("receive from %s:%d failed: %s" % (self.host, self.port, e)) from e
            if k == 0:
                self.close()
                raise errors.NetworkException("connection to %s:%d closed by the broker" % (self.host, self.port))
            got += k
        return buf

    def _read_frame(self):
        (size,) = _SIZE.unpack(self._recv_exact(4))
        if size < 4 or size > MAX_RESPONSE:
            self.close()
            raise errors.NetworkException("invalid response size %d from %s:%d" % (size, self.host, self.port))
        return memoryview(bytes(self._recv_exact(size)))

    def close(self):
        sock, self.sock = getattr(self, "sock", None), None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    @property
    def closed(self):
        return self.sock is None
