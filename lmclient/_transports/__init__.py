"""lmclient's own transports: send one prepared request, return status, headers and body.

Why not httpx's: ``httpx.Client``'s layers (request building, cookies, auth, redirects) and its
transport's general HTTP model do work on every call that an LLM client never needs, and
``httpx.AsyncClient``'s pool scans every connection on every request, so async throughput falls
as concurrency grows (docs/performance.md has the comparison). An LLM client sends
the same request head to the same server again and again, so the transports here:

* speak HTTP/1.1 themselves (`lmclient._wire.http11`, sans I/O): the request head depends only on
  the URL and the client's headers and is encoded once; a response head like the connection's last
  but for its Content-Length costs three comparisons, one whose lines were seen before (servers
  repeat them) a dictionary look-up per line; a call's path through the transport
  is a few functions long, since in Python each call costs every request;
* keep idle connections in a LIFO list per origin: O(1) to check out and to return, the most
  recently used connection first (the one least likely to have been closed by the server);
  connections idle for `KEEPALIVE_EXPIRY` are dropped, a connection with anything to read while
  idle (the server closed it, or wrote bytes nobody asked for) is never reused, and a pooled
  connection that turns out closed before any byte of its response arrived is replaced by one
  fresh connection, once. A server may answer before it has read the whole request (a 413, a
  401) and close: a send broken that way still reads the answer, which is the call's result;
  Open connections are not capped (the caller bounds its concurrency, as `generate_many` does),
  idle ones are, at `MAX_IDLE_CONNECTIONS` per origin;
* sync: a socket with Python's timeout, whose waits a signal cannot stretch (the kernel's
  SO_RCVTIMEO and SO_SNDTIMEO, cheaper by a poll() per send and receive, restart with each
  signal); async: an `asyncio.Protocol` that parses in ``data_received`` and wakes the waiting
  task once per response (or per chunk while streaming), with one timer per connection for
  the read timeout and the call's deadline that re-arms itself instead of one timer per read
  or per request (or per deadline), and that is
  never written to once closed (the server may close a fresh connection before the request
  goes out: that is a `common.StaleConnection`, as on a sync socket). Every read is bounded: a
  whole response by ``max_bytes`` (counted after decoding), a stream by flow control (reading
  pauses while `STREAM_HIGH_WATER` bytes wait for the reader) and the read timeout, and the
  head by the parser; every wait, the send included, by the timeouts and the deadline;
* TLS with httpx's own context (`httpx.create_ssl_context`: certifi, verification on,
  ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured); no proxies; no redirects;
* a Unix socket instead of TCP when the client has ``uds=`` (httpx's name): every connection of
  that transport goes to the socket, whatever the URL's host, and is pooled, checked and timed
  like a TCP one; only the connect differs (``AF_UNIX``, no TCP options), so a TCP call pays
  nothing for it. The environment's proxies never apply to a socket.

Three cases go through httpx instead: a user's ``http_client`` (its public ``send()``, so
their proxies, mounts and HTTP/2 apply), a server the environment puts behind a proxy
(`lmclient._proxies`: an httpx transport with that proxy), and an active respx mock. respx's
mockers replace a method that lmclient's sockets never reach — ``using="httpcore"`` (the
default) httpcore's connection pools' ``handle_request``, ``using="httpx"`` httpx's clients'
``_transport_for_url`` — so each request first checks, once respx is imported, with one
identity comparison per mocker (`common.RespxMocks`), whether those are still the originals,
and while one is not, sends through an httpx client of lmclient's own (`common.own_client`),
which respx then intercepts as users expect, whichever mocker and whenever the mock started.
A compressed body is still inflated by `Limiter` there, piece by piece within ``max_bytes``,
and not by httpx, which inflates a whole chunk at once. Whichever way a stream was opened, the
shells get the same handle, a `common.StreamResponse` (status, headers, the checked chunks,
close): httpx's response is adapted to it, lmclient's own is never wrapped in one of httpx's.

Failures map to lmclient's errors: cannot connect, connection broken → `APIConnectionError`;
timeouts and an expired deadline → `APITimeoutError`; bytes that are not HTTP, or a body larger
than ``max_bytes`` (refused on its declared length before reading, else while counting) →
`ProtocolError`. One function maps them (`common.io_error`), where they arise: in each phase
of an exchange (sending the request, receiving the head, the body), the connect and the
`Limiter`; above the phases only lmclient's errors travel, and whatever ends an exchange closes
its connection. Whether a request is sent again is one predicate (`common.may_resend`).

The package: `common` (pool, limits, targets, the error map, the resend predicate), `sync`
(`SyncTransport`) over `sockets` (a blocking socket's connection, its phases and its connect),
and `aio` (`AsyncTransport`) over `protocol` (the asyncio protocol's), kept apart so that a
program using only `Client` never imports asyncio. The two transports are twins (`_exchange` the
same loop in both: `scripts/twins.py`); what differs between the designs is the connection's.
"""
