"""`tests.stacks.app.respond` served by aiohttp's own web server, keep-alive timeout 1 s.

Run as ``python -m tests.stacks.aiohttp_app --port N`` (from the repository root): it listens
on 127.0.0.1 only, until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse

from aiohttp import web

from tests.stacks.app import respond

KEEPALIVE_TIMEOUT = 1.0


async def handle(request: web.Request) -> web.StreamResponse:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    port = int(peer[1]) if peer else 0
    headers = {k.lower(): v for k, v in request.headers.items()}
    reply = respond(request.method, request.path, headers, await request.read(), port)
    if reply.chunks is None:
        response = web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        if reply.close:
            response.force_close()
        return response
    stream = web.StreamResponse(status=reply.status, headers=reply.headers)
    if reply.close:
        stream.force_close()
    await stream.prepare(request)
    for piece in reply.chunks:
        await stream.write(piece)
    await stream.write_eof()
    return stream


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    application = web.Application(client_max_size=1 << 20)
    application.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(
        application,
        host="127.0.0.1",
        port=args.port,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
        access_log=None,
        print=None,
        handle_signals=True,
    )


if __name__ == "__main__":
    main()
