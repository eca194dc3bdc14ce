"""Helpers that tests in several folders share (one copy each), as opposed to a folder's own conftest."""
