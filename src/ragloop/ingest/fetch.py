"""One download for URL ingest, bounded: a deadline for the whole download (connect to last
byte, redirects included), a cap on its bytes (after decompression), and which addresses it
may reach.

A per-read timeout does not bound a download: a server that sends one byte every few seconds
never lets a read time out. So a timer shuts the download's sockets down at the deadline,
which ends any read blocked on them at once. Addresses are checked on the socket once
connected (what DNS answered, every redirect hop), so a name that resolves to a private
address, or rebinds to one, is refused like the address itself.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ragloop.core.errors import ReaderError
from ragloop.ingest.limits import ReadLimitError, ReadLimits

MAX_REDIRECTS = 5
# Cloud metadata services outside the link-local ranges (AWS over IPv6, Alibaba Cloud).
_METADATA = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_PIECE = 1 << 16


@dataclass(frozen=True)
class Reach:
    """Which addresses a download may connect to beyond public ones: `private` (loopback,
    private networks: an intranet, `--private-urls`), `link_local` (169.254.0.0/16,
    fe80::/10 and the cloud metadata addresses: `--link-local-urls`). Independent: one does
    not open the other."""

    private: bool = False
    link_local: bool = False


PUBLIC = Reach()

def _plain(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address a peer really is: IPv4 inside IPv4-mapped, 6to4 and NAT64 IPv6 forms."""
    ip = ipaddress.ip_address(addr.split("%", 1)[0])  # an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def refusal(addr: str, reach: Reach) -> str | None:
    """Why a download may not connect to `addr`, or None when it may."""
    ip = _plain(addr)
    if ip.is_link_local or ip in _METADATA:
        return None if reach.link_local else (
            f"{addr} is a link-local address, where cloud metadata services answer; it needs"
            " --link-local-urls")
    if ip.is_global or reach.private:
        return None
    return f"{addr} is a private or loopback address; it needs --private-urls"


class _Watch:
    """One download's deadline and peer check, shared by the connections it opens."""

    def __init__(self, seconds: float, reach: Reach) -> None:
        self.seconds, self.reach = seconds, reach
        self.deadline = time.monotonic() + seconds
        self.expired = False
        self.refused: str | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def adopt(self, sock: socket.socket) -> None:
        peer = sock.getpeername()[0]
        self.refused = refusal(peer, self.reach)
        if self.refused is not None:
            sock.close()
            raise OSError(self.refused)
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def close(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # a recv blocked on it returns at once


class _Connection(HTTPConnection):
    def __init__(self, *args: object, watch: _Watch, **kwargs: object) -> None:
        self._watch = watch
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        self._watch.adopt(sock)
        return sock


class _TlsConnection(_Connection, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


def _pool(url: str, watch: _Watch) -> HTTPConnectionPool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https":
        import certifi

        return _TlsPool(host, parts.port or 443, cert_reqs="CERT_REQUIRED",
                        ca_certs=certifi.where(), maxsize=1, watch=watch)
    return _Pool(host, parts.port or 80, maxsize=1, watch=watch)


def _headers() -> dict[str, str]:
    from trafilatura.downloads import DEFAULT_HEADERS

    return dict(DEFAULT_HEADERS)  # the encodings urllib3 decodes, trafilatura's user agent


def download(url: str, reach: Reach = PUBLIC, limits: ReadLimits | None = None) -> bytes:
    """The body of `url` (decompressed), following redirects; ReaderError when it cannot be
    had, ReadLimitError past the download deadline or the bytes limit."""
    limits = limits or ReadLimits()
    watch = _Watch(limits.download_timeout_s, reach)
    pools: list[HTTPConnectionPool] = []
    try:
        for _ in range(MAX_REDIRECTS + 1):
            if urlsplit(url).scheme not in ("http", "https"):
                raise ReaderError(f"could not download the page: redirected to {url!r}")
            pools.append(pool := _pool(url, watch))
            parts = urlsplit(url)
            timeout = urllib3.Timeout(connect=watch.left(), read=watch.left())
            response = pool.urlopen("GET", (parts.path or "/") + (
                f"?{parts.query}" if parts.query else ""), headers=_headers(),
                retries=False, redirect=False, preload_content=False, timeout=timeout,
                assert_same_host=False)
            if response.status in (301, 302, 303, 307, 308) and response.headers.get(
                    "Location"):
                url = urljoin(url, response.headers["Location"])
                response.release_conn()
                continue
            if response.status != 200:
                raise ReaderError(f"could not download the page (HTTP {response.status})")
            return _body(response, limits, watch)
        raise ReaderError(f"could not download the page: more than {MAX_REDIRECTS} redirects")
    except ReaderError:
        raise
    except Exception as exc:
        if watch.expired:
            raise ReadLimitError("the download took too long", "download_timeout_s",
                                 limits.download_timeout_s) from None
        if watch.refused is not None:
            raise ReaderError(f"could not download the page: {watch.refused}") from None
        raise ReaderError(f"could not download the page ({type(exc).__name__}: {exc})"
                          ) from None
    finally:
        watch.close()
        for pool in pools:
            pool.close()


def _body(response: urllib3.BaseHTTPResponse, limits: ReadLimits, watch: _Watch) -> bytes:
    """The decoded body, counted as it comes (urllib3 >= 2.6 bounds what one read may
    decompress, so a compression bomb is counted piece by piece too)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise ReadLimitError(f"the page declares {int(declared):,} bytes", "read_max_bytes",
                             limits.max_bytes)
    out = bytearray()
    for piece in response.stream(_PIECE):
        out += piece
        if len(out) > limits.max_bytes:
            raise ReadLimitError("the page is too large", "read_max_bytes", limits.max_bytes)
        if watch.expired:
            raise ReadLimitError("the download took too long", "download_timeout_s",
                                 limits.download_timeout_s)
    if watch.expired:  # the timer cut the body short: what came is not the page
        raise ReadLimitError("the download took too long", "download_timeout_s",
                             limits.download_timeout_s)
    return bytes(out)
