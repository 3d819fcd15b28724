"""The report in a real browser: headless Chromium renders it without errors, images decode, nothing overflows."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.harness.report.chromium import Browser, find_chromium


def chromium_or_skip() -> str:
    """Chromium's path; installs the Debian package when missing and possible, else skips saying why."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and cannot be installed here (needs root and apt-get)")
    done = subprocess.run("apt-get update -qq && apt-get install -y -qq chromium", shell=True, capture_output=True,
                          text=True, timeout=600)
    found = find_chromium()
    if not found:
        pytest.skip(f"chromium could not be installed: {done.stderr.strip()[-300:]}")
    return found


@pytest.fixture(scope="module")
def page(smoke_report, tmp_path_factory):
    screenshot = tmp_path_factory.mktemp("browser") / "report.png"
    with Browser(chromium_or_skip(), width=1280, height=900) as browser:
        browser.open(smoke_report)
        facts = browser.evaluate("""({
            tables: document.querySelectorAll("table").length,
            images: document.images.length,
            broken: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length,
            pageWidth: document.documentElement.scrollWidth,
            viewWidth: document.documentElement.clientWidth,
            wideImages: Array.from(document.images).filter(i => i.getBoundingClientRect().right > innerWidth).length,
            sortedFirst: (() => {
                const table = document.querySelector("table.leaderboard");
                table.querySelectorAll("th")[0].click();
                table.querySelectorAll("th")[0].click();  // descending: crasher is no longer first
                return table.tBodies[0].rows[0].cells[0].textContent;
            })(),
        })""")
        png = browser.screenshot(screenshot)
        problems = browser.problems()
    print(f"screenshot: {screenshot}")
    return {"facts": facts, "png": png, "problems": problems}


@pytest.mark.slow
def test_the_page_renders_without_console_errors(page):
    assert page["problems"] == []


def test_tables_and_images_are_present_and_every_image_decodes(page):
    facts = page["facts"]
    assert facts["tables"] >= 5  # leaderboard, ranking, ledger, packages, datasets, generators, history
    assert facts["images"] == 9 and facts["broken"] == 0


def test_nothing_overflows_the_page_width(page):
    facts = page["facts"]
    assert facts["pageWidth"] <= facts["viewWidth"]
    assert facts["wideImages"] == 0


def test_the_leaderboard_sorts_by_a_clicked_column(page):
    assert page["facts"]["sortedFirst"] == "uniform"


def test_a_full_page_screenshot_is_saved(page):
    png = page["png"]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 1280 and height > 3000  # the whole page, not just the first screen
