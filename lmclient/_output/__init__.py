"""The output-type compiler: an output type (a class, a marker) becomes what a server
is told (a JSON schema, a regex, a GBNF grammar) and the decoder that validates its
answer. Pure: no I/O, no lmclient imports from outside this package but the errors."""
