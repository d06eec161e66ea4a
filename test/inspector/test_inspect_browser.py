"""``mimir inspect`` in a real headless browser (Debian's chromium driven by selenium through
chromedriver): map -> node -> the evidence keyframe of its ``locked`` property (with the node's
box drawn on the image), the time slider
moved to before the lock was learned, the keyframe gallery filtered, a page that updates itself
while memory is written. Screenshots of every view go to ``$MIMIR_SCREENSHOTS`` (default: the
test's temporary folder).

``MIMIR_INSPECT_RUN=<run or memory folder>`` runs the same walk on another folder (a copy of it):
the README's screenshots come from a ``mimir sim`` run that way.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_helpers import Serving, make_run_folder

from mimir.inspect.folder import MemoryFolder, memory_folder
from mimir_memory.world import WorldMemory

CHROMIUM = Path("/usr/bin/chromium")
#: the share of a drawn path's bounding box that lies inside its image
_INSIDE = ("var b=arguments[0].getBBox(),v=arguments[0].ownerSVGElement.viewBox.baseVal;"
           "var w=Math.max(0,Math.min(b.x+b.width,v.width)-Math.max(b.x,0)),"
           "h=Math.max(0,Math.min(b.y+b.height,v.height)-Math.max(b.y,0));"
           "return w*h/Math.max(b.width*b.height,1e-9);")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def _browser_missing() -> str:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (scripts/setup.sh installs it)"
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        return ("Debian's chromium and chromium-driver are not installed (scripts/setup.sh "
                "installs them when run as root)")
    return ""


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1000"):
        options.add_argument(arg)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium fetch a driver
    browser = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _folder(tmp_path: Path) -> Path:
    given = os.environ.get("MIMIR_INSPECT_RUN")
    if not given:
        return make_run_folder(tmp_path / "run").memory
    copy = tmp_path / "copy"
    shutil.copytree(memory_folder(Path(given)), copy)
    return copy


def _locked_node(path: Path) -> tuple[str, float, str]:
    """A node memory learned locked, when it learned it, and a camera that took keyframes."""
    folder = MemoryFolder(path)
    try:
        graph = folder.graph()
        node = next(n for n in sorted(graph.nodes.values(), key=lambda n: n.node_id)
                    if (p := n.properties.get("locked")) is not None and p.value is True)
        stamp = node.properties["locked"].stamp
        assert stamp is not None
        camera = folder.cameras()[0]
        return node.node_id, stamp, camera
    finally:
        folder.close()


def test_map_node_evidence_time_travel_gallery_and_live_updates(driver: Any,
                                                                 tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    shots = Path(os.environ.get("MIMIR_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)
    memory = _folder(tmp_path)
    locked, lock_stamp, camera = _locked_node(memory)

    def css(selector: str) -> list[Any]:
        return driver.find_elements(By.CSS_SELECTOR, selector)

    with Serving(memory) as served:
        # map -> node (clicked on the map itself)
        driver.get(served.url)
        assert css(f'svg a[data-node="{locked}"]'), "the locked node is not on the map"
        driver.save_screenshot(str(shots / "map.png"))
        css(f'svg a[data-node="{locked}"]')[0].click()
        wait_for(lambda: f"/node/{locked}" in driver.current_url, "the node page")
        row = css('tr[data-property="locked"]')
        assert row, "the node page shows no locked property"
        driver.save_screenshot(str(shots / "node.png"))

        # -> the evidence keyframe of the lock, with its image loaded
        evidence = row[0].find_elements(By.CSS_SELECTOR, "a.evidence-keyframe")
        assert evidence, "the locked property cites no keyframe"
        hrefs = [a.get_attribute("href") for a in evidence]
        frame_id = hrefs[0].rsplit("/", 1)[-1]
        evidence[0].click()
        wait_for(lambda: f"/keyframe/{frame_id}" in driver.current_url, "the keyframe page")
        image = driver.find_element(By.ID, "full")
        assert wait_for(lambda: driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", image),
            "the full image to load") > 0
        # with the locked node's box drawn where a camera saw it (every camera keeps the
        # frames of an interaction, also one that faced elsewhere: the first one showing it)
        # (the frame where most of the drawn box falls inside the image)
        shown, notes = [], []
        for href in hrefs:
            if href != driver.current_url:
                driver.get(href)
            box = css(f'svg.keyframe-overlay g.node-box[data-node="{locked}"] path')
            if not box:
                notes.append(driver.find_element(By.ID, "overlay-note").text)
                continue
            shown.append((driver.execute_script(_INSIDE, box[0]), href))
        assert shown, notes
        assert max(shown)[0] > 0.0, "the box lies outside every evidence frame"
        # the screenshot: of the node's frames, the one that shows most of its box
        driver.get(served.url + f"keyframes?node={locked}")
        gallery = [a.get_attribute("href") for a in css(".gallery figure a")][:24]
        for href in gallery:
            driver.get(href)
            box = css(f'svg.keyframe-overlay g.node-box[data-node="{locked}"] path')
            if box:
                shown.append((driver.execute_script(_INSIDE, box[0]), href))
        driver.get(max(shown)[1])
        driver.save_screenshot(str(shots / "keyframe.png"))

        # the time slider moved to before the lock: the property is gone
        driver.get(served.url)
        slider = driver.find_element(By.ID, "t")
        driver.execute_script(
            "arguments[0].value = arguments[1];"
            "arguments[0].dispatchEvent(new Event('input'));"
            "arguments[0].dispatchEvent(new Event('change'));", slider, f"{lock_stamp - 1:.3f}")
        wait_for(lambda: "t=" in driver.current_url, "the map at the chosen time")
        shown = float(driver.find_element(By.ID, "t").get_attribute("value"))
        assert shown < lock_stamp
        driver.save_screenshot(str(shots / "map_before_lock.png"))
        before = css(f'svg a[data-node="{locked}"]')
        if before:  # the node may not have existed yet either
            before[0].click()
            wait_for(lambda: f"/node/{locked}" in driver.current_url, "the node in the past")
            assert not css('tr[data-property="locked"]'), "the lock shows before it was learned"

        # the gallery filtered by camera
        driver.get(served.url + "keyframes")
        everything = len(css(".gallery figure"))
        Select(driver.find_element(By.ID, "filter-camera")).select_by_value(camera)
        driver.find_element(By.ID, "filter-apply").click()
        wait_for(lambda: f"camera={camera}" in driver.current_url, "the filtered gallery")
        captions = [f.text for f in css(".gallery figure figcaption")]
        assert captions and all(c.startswith(camera) for c in captions)
        assert len(captions) <= everything
        driver.save_screenshot(str(shots / "keyframes.png"))

        for view in ("timeline", "planner", "agenda"):
            driver.get(served.url + view)
            driver.save_screenshot(str(shots / f"{view}.png"))

        # a live page follows a writer without being reloaded by hand
        driver.get(served.url + f"node/{locked}")
        world = WorldMemory.open(memory / "world.db")
        try:
            world.set_property(locked, "colour_seen_live", "teal", confidence=0.6,
                               stamp=lock_stamp + 1000.0)
        finally:
            world.close()
        wait_for(lambda: css('tr[data-property="colour_seen_live"]'), "the live update")
