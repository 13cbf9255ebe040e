"""Helpers for tests/render/test_browser.py: headless Chromium over the DevTools protocol, PNG checks."""
