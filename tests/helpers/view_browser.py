"""Headless Chromium through selenium for the live view's browser tests; a test skips
(fails under INNET_REQUIRE_P4=1, tests/conftest.py) when Chromium, chromedriver or selenium
is missing."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium keeping its browser console log, closed on the way out."""
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("needs selenium (pip install selenium)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,900", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def severe(driver: Any) -> list[dict[str, Any]]:
    """The browser console's errors since the last call."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
