//! Integration tests through the public API against the scripted FakeServer.
