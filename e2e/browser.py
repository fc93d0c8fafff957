"""Headless Chromium for the tests that look at a page as a person does (the topology map).

Debian's ``chromium`` and ``chromium-driver`` packages, installed with apt-get when missing (the
test set-up runs as root on a fresh machine, as CI does); Selenium drives that chromedriver by
its path, so Selenium Manager never looks for, or downloads, a browser or a driver.

``MapPage`` reads the topology map through the DOM the page promises (``kueue_tas/mapview/
render.py`` and ``panels.py``): host tiles ``.h[data-node]`` in ``section.flavor[data-flavor]``,
the workload list ``#wl-list li[data-workload]``, highlighted tiles ``.hl`` with ``data-count``,
the why-not's ``.wn-*`` fields.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = ("chromium", "chromium-driver")
INSTALL_TIMEOUT_S = 900


class BrowserUnavailable(RuntimeError):
    """Chromium or its driver is missing and cannot be installed; the message says what to do."""


def _run(cmd: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrowserUnavailable(f"`{' '.join(cmd)}` failed: {exc}") from exc
    if proc.returncode != 0:
        last = ((proc.stderr or proc.stdout).strip().splitlines() or ["no output"])[-1]
        raise BrowserUnavailable(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {last}")


def ensure_chromium() -> None:
    """Install Debian's chromium and chromium-driver when either is missing."""
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    wanted = f"Debian's {' and '.join(PACKAGES)} ({CHROMIUM}, {CHROMEDRIVER})"
    if shutil.which("apt-get") is None:
        raise BrowserUnavailable(f"the browser tests need {wanted}, and there is no apt-get to install them")
    if os.geteuid() != 0:
        raise BrowserUnavailable(
            f"the browser tests need {wanted}: run `sudo apt-get install -y {' '.join(PACKAGES)}` first"
        )
    _run(["apt-get", "update", "-qq"])
    _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES])
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise BrowserUnavailable(f"apt-get installed {' '.join(PACKAGES)}, but {wanted} are still not there")


def chromium(width: int = 1200, height: int = 800) -> WebDriver:
    """A headless Chromium window of ``width`` x ``height`` CSS pixels."""
    ensure_chromium()
    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",  # every page the tests open is on this machine
        "--hide-scrollbars",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    # --window-size is the window's outer size; the page gets exactly width x height.
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    return driver


class MapPage:
    """The topology map open in ``driver``."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver

    def open(self, url: str) -> None:
        self.driver.get(url)
        self.driver.find_element(By.ID, "wl-list")  # the page is there (its script has run)

    def loaded(self) -> bool:
        """The page is there and its script has run (the workload list exists)."""
        return bool(self.js("return !!document.getElementById('wl-list');"))

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def source_line(self) -> str:
        return str(self.js("var e = document.getElementById('map-source'); return e ? e.textContent : '';"))

    def hosts(self, flavor: str) -> list[str]:
        """The host tiles of ``flavor``, by node name."""
        return list(
            self.js(
                "return Array.from(document.querySelectorAll('section.flavor')).filter("
                "  s => s.dataset.flavor === arguments[0]).flatMap("
                "  s => Array.from(s.querySelectorAll('.h[data-node]'), h => h.dataset.node));",
                flavor,
            )
        )

    def workloads(self) -> dict[str, str]:
        """Workload key -> its state class (``st-admitted``, ``st-pending`` ...)."""
        items = self.js(
            "return Array.from(document.querySelectorAll('#wl-list li[data-workload]'), li => "
            "  [li.dataset.workload, Array.from(li.classList).find(c => c.startsWith('st-')) || '']);"
        )
        return {key: state for key, state in items}

    def select(self, workload: str) -> None:
        """Click the workload in the list, as a person would, and wait for the selection."""
        item = next(
            li
            for li in self.driver.find_elements(By.CSS_SELECTOR, "#wl-list li[data-workload]")
            if li.get_attribute("data-workload") == workload
        )
        item.click()
        deadline = time.monotonic() + 5
        while "sel" not in (item.get_attribute("class") or "").split():
            if time.monotonic() > deadline:
                raise TimeoutError(f"clicking {workload} selected nothing")
            time.sleep(0.05)

    def selected(self) -> str | None:
        key = self.js("var li = document.querySelector('#wl-list li.sel'); return li ? li.dataset.workload : null;")
        return None if key is None else str(key)

    def highlighted_hosts(self, flavor: str) -> dict[str, int]:
        """Host tiles of ``flavor`` the selection highlights -> the pod count drawn on them."""
        return self._highlighted(flavor, ".h.hl", "node")

    def highlighted_domains(self, flavor: str) -> dict[str, int]:
        return self._highlighted(flavor, ".d.hl", "domain")

    def domains_holding_highlights(self, flavor: str) -> set[str]:
        """Domain tiles drawn around highlighted tiles (``.hl-in``)."""
        return set(self._highlighted(flavor, ".d.hl-in", "domain"))

    def best_domains(self, flavor: str) -> set[str]:
        """Tiles the why-not marks as the best domain of the level searched (``.best``)."""
        return set(self._highlighted(flavor, ".d.best", "domain")) | set(self._highlighted(flavor, ".h.best", "node"))

    def _highlighted(self, flavor: str, selector: str, key: str) -> dict[str, int]:
        pairs = self.js(
            "var s = Array.from(document.querySelectorAll('section.flavor')).find("
            "  x => x.dataset.flavor === arguments[0]);"
            "return s ? Array.from(s.querySelectorAll(arguments[1]), e => "
            "  [e.dataset[arguments[2]], Number(e.dataset.count || 0)]) : [];",
            flavor,
            selector,
            key,
        )
        return {name: count for name, count in pairs}

    def why_not(self, workload: str) -> list[dict[str, Any]]:
        """The visible why-not blocks of ``workload``'s section, as ``describe -o json`` names them."""
        return list(
            self.js(
                "var sec = Array.from(document.querySelectorAll('section.wl-detail')).find("
                "  s => s.dataset.workload === arguments[0]);"
                "if (!sec || sec.hidden) return [];"
                "var num = (w, c) => Number(w.querySelector(c).textContent);"
                "return Array.from(sec.querySelectorAll('.why-not'), w => ({"
                "  podSet: w.dataset.podset,"
                "  level: w.querySelector('.wn-level').dataset.levelKey,"
                "  domain: w.querySelector('.wn-domain').dataset.domain,"
                "  domainFit: num(w, '.wn-domain-fit'), fit: num(w, '.wn-fit'), needed: num(w, '.wn-needed'),"
                "  oneDomain: w.dataset.oneDomain === 'true',"
                "  totalNodes: num(w, '.wn-total-nodes'), excluded: num(w, '.wn-excluded'),"
                "  reasons: Object.fromEntries(Array.from(w.querySelectorAll('li.wn-reason'), "
                "    li => [li.dataset.reason, Number(li.querySelector('.wn-count').textContent)]))}));",
                workload,
            )
        )

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.driver.save_screenshot(str(path)):
            raise RuntimeError(f"Chromium could not write the screenshot {path}")
        return path
