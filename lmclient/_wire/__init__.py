"""The sans-I/O wire decoders: HTTP/1.1 response heads and bodies, server-sent events,
the OpenAI bodies' msgspec structs, partial JSON. Bytes in, values out: no sockets, no
clocks, nothing from the client above them."""
