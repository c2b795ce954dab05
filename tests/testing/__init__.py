"""Tests of lmclient.testing, the fake OpenAI-compatible server."""
