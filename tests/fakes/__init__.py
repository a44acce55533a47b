"""Local fakes of external services (real HTTP servers on 127.0.0.1, port 0) for tests."""
