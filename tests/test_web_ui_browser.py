"""The web UI as a person uses it, in Debian's headless Chromium (driven by its chromium-driver):
start a run from Locust's form against the pacing server, open the LLM tab and watch the
progress reach the total, read the TTFT and the verdict there and on the run's page (/llm),
follow its links to run.json and the report, and find them in Locust's Download Data tab too.
Locust runs under a --web-base-path, as behind a proxy, so every link is seen to follow it.
Screenshots are kept as the suite's artifacts, in build/test-artifacts/web-ui/ (each run
replaces the last).

In the engine tier: a browser takes several seconds to start and a core while it runs.
scripts/test.sh installs chromium and chromium-driver for the whole suite; without them, or
without selenium, this test skips saying so.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rig_helpers import REPO, running_pacer, running_web_ui

pytestmark = pytest.mark.engine

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REQUESTS = 60  # about 10 s at 2 users: the tab (polled every 2 s) shows it running
BASE = "/rig"  # Locust's --web-base-path


@pytest.fixture
def browser() -> Iterator[object]:
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.skip("no Debian chromium and chromium-driver (apt-get install chromium "
                    "chromium-driver; scripts/test.sh installs them)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)  # never a download
    try:
        yield driver
    finally:
        driver.quit()


def _until(what: str, condition: Callable[[], object], timeout_s: float = 90) -> object:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.25)
    return value


def _click_by_id(driver: object, element_id: str) -> bool:
    """Click the element in one script, or say it is not there yet: the page redraws itself while
    it polls the run, so an element found in one call of the driver can be stale in the next."""
    return driver.execute_script(
        "const element = document.getElementById(arguments[0]);"
        "if (element) { element.click(); } return Boolean(element);", element_id)


def _tab_rows(driver: object) -> dict[str, str]:
    """The LLM tab's table as the page shows it, figure -> value, read in one script (React
    redraws it between two of the driver's calls)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('table tbody tr')]"
        ".map((row) => [...row.cells].map((cell) => cell.innerText));")
    return {cells[0]: cells[1] for cells in rows if len(cells) == 2}


def test_a_run_started_from_the_form_shows_its_progress_ttft_and_verdict(
        browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = browser
    shots = REPO / "build" / "test-artifacts" / "web-ui"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "20", "--gap-ms", "20") as engine_url, \
            running_web_ui(engine_url, out, "--requests", str(REQUESTS), "--max-tokens", "16",
                           "--ignore-eos", base_path=BASE) as ui:
        driver.get(ui + "/")
        users = _until("the form", lambda: driver.find_elements(By.NAME, "userCount"))[0]
        users.send_keys(Keys.CONTROL, "a")  # the form's own field: clear() leaves React's value
        users.send_keys("2")
        driver.save_screenshot(str(shots / "1-form.png"))
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        tab = _until("the LLM tab", lambda: [t for t in driver.find_elements(
            By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == "LLM"])[0]
        tab.click()
        during = _until("the run under way", lambda: (
            rows := _tab_rows(driver)).get("Run", "").endswith(("running", "finished")) and rows)
        driver.save_screenshot(str(shots / "2-llm-tab-running.png"))
        end = _until("the verdict in the tab", lambda: (
            rows := _tab_rows(driver)).get("Verdict", "").isupper() and rows)
        driver.save_screenshot(str(shots / "3-llm-tab-done.png"))
        [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]")
         if "DOWNLOAD" in t.text.strip().upper()][0].click()
        downloads = {a.text: a.get_attribute("href") for a in _until(
            "the Download Data tab's links", lambda: driver.find_elements(
                By.PARTIAL_LINK_TEXT, "LLM: "))}

        driver.get(ui + "/llm")
        verdict = _until("the page's verdict", lambda: driver.find_element(
            By.ID, "verdict").text if driver.find_element(By.ID, "verdict").text.isupper()
            else "")
        page_ttft = driver.find_element(By.ID, "ttft-p50").text
        page_progress = driver.find_element(By.ID, "progress").text
        line = driver.find_element(By.CSS_SELECTOR, "#chart-tok-s polyline").get_attribute("points")
        scale = driver.find_element(By.ID, "chart-tok-s-scale").text
        failed_line = driver.find_element(By.CSS_SELECTOR, "#chart-failed polyline"
                                          ).get_attribute("points")
        failed_zero = driver.find_element(By.CSS_SELECTOR, "#chart-failed line[data-value='0']"
                                          ).get_attribute("y1")
        itl_scale = driver.find_element(By.ID, "chart-itl-scale").text
        driver.save_screenshot(str(shots / "4-run-page.png"))
        driver_urls = {"run.json": driver.find_element(By.ID, "file-run-json").get_attribute(
            "href")}
        _until("the run.json link", lambda: _click_by_id(driver, "file-run-json"))
        run_json = json.loads(_until("run.json", lambda: driver.find_element(
            By.TAG_NAME, "body").text))
        driver.back()
        _until("the report's link", lambda: _click_by_id(driver, "file-report"))
        report_title = _until("the report", lambda: driver.find_elements(By.TAG_NAME, "h1"),
                              timeout_s=180)[0].text
        driver.save_screenshot(str(shots / "5-report.png"))
    with (out / "runs.csv").open(newline="") as file:
        row = next(csv.DictReader(file))
    done, _, rest = during["Progress"].partition(f"/{REQUESTS} requests ")
    assert done.isdigit() and int(done) <= REQUESTS and rest, during
    assert end["Progress"].startswith(f"{REQUESTS}/{REQUESTS} requests 100%"), end
    assert end["Output tokens"].startswith(f"{REQUESTS * 16:,} tokens"), end
    assert verdict == end["Verdict"] == row["verdict"].upper() == run_json["verdict"].upper()
    assert page_progress == f"{REQUESTS} of {REQUESTS} requests"
    assert len(line.split()) >= 2 and "peak" in scale, (line, scale)  # tok/s drawn over time
    # none failed, at any time: the line lies on the chart's 0
    assert {float(p.split(",")[1]) for p in failed_line.split()} == {float(failed_zero)}
    # the pacer's chunks come 20 ms apart: each second's ITL p50 within its bin's 4.2% of that
    itl_peak = float(re.search(r"peak ([\d.]+) ms", itl_scale).group(1))
    assert 18.5 <= itl_peak <= 24.0, itl_scale  # (a loaded host sends some chunks late)
    # TTFT as shown (whole ms from 10 ms up) is the row's p50, exact from the same records
    assert page_ttft == f"{float(row['ttft_p50_ms']):,.0f}"
    assert end["TTFT"].startswith(f"p50 {page_ttft} · ")
    assert run_json["run_id"] == row["run_id"] and row["users"] == "2"
    assert downloads["LLM: this run's run.json"] == f"{ui}/llm/files/run.json"
    assert driver_urls["run.json"] == f"{ui}/llm/files/run.json"  # BASE kept by the page's link
    assert report_title and (out / "runs" / row["run_id"] / "report" / "report.html").exists()
    assert all((shots / name).stat().st_size > 10_000 for name in (
        "1-form.png", "2-llm-tab-running.png", "3-llm-tab-done.png", "4-run-page.png"))


def test_a_steady_run_draws_a_flat_output_rate_with_its_axes(browser: object, tmp_path: Path
                                                               ) -> None:
    """Issue 53: 8 users against the pacer at a token every 10 ms. The run's page draws output
    tok/s flat (each whole second's point within 15% of their median), every chart with its
    values up the side, its unit and time along the bottom. The page is kept as
    build/test-artifacts/web-ui/6-steady-run-page.png."""
    from selenium.webdriver.common.by import By

    driver = browser
    shots = REPO / "build" / "test-artifacts" / "web-ui"
    shots.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "10", "--gap-ms", "10") as engine_url, \
            running_web_ui(engine_url, out, "--requests", "96", "--max-tokens", "64",
                           "--ignore-eos", "--autostart", users=8) as ui:
        driver.get(ui + "/llm")
        _until("the page's verdict", lambda: driver.find_element(By.ID, "verdict").text.isupper())
        time.sleep(1.5)  # the page's next poll draws the finished run
        driver.save_screenshot(str(shots / "6-steady-run-page.png"))
        charts = driver.execute_script(
            "return [...document.querySelectorAll('svg.chart')].map((svg) => ({id: svg.id, "
            "labels: [...svg.querySelectorAll('text')].map((t) => t.textContent), points: "
            "svg.querySelector('polyline.settled').getAttribute('points')}));")
        ticks = driver.execute_script(  # the tok/s chart's y ticks: (value, y) from 0 up
            "return [...document.querySelectorAll('#chart-tok-s line[data-value]')]"
            ".map((l) => [Number(l.dataset.value.replace(/,/g, '')), Number(l.getAttribute('y1'))]);")
    by_id = {c["id"]: c for c in charts}
    tok_s = by_id["chart-tok-s"]
    assert {"tok/s", "0", "0:00", "time since the first request (m:ss)"} <= set(tok_s["labels"])
    for chart_id in ("chart-ttft", "chart-itl", "chart-failed"):
        assert {"0", "0:00", "time since the first request (m:ss)"} <= set(by_id[chart_id]["labels"])
    (top_value, top_y), (_, zero_y) = ticks[-1], ticks[0]
    rates = [(zero_y - float(p.split(",")[1])) / (zero_y - top_y) * top_value
             for p in tok_s["points"].split()][:-1]  # the last second is cut by the run's end
    median = sorted(rates)[len(rates) // 2]
    assert len(rates) >= 4 and all(abs(r - median) <= 0.15 * median for r in rates), rates
    assert (shots / "6-steady-run-page.png").stat().st_size > 10_000
