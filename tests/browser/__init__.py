"""Helpers for tests/test_browser.py: headless Chromium over the DevTools protocol, PNG checks."""
