"""Debian's chromium, headless, for tests of the HTML reports: installed with apt-get when missing,
started with its own temporary profile and no network features; a screenshot or the DOM after scripts ran."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
NAMES = ("chromium", "chromium-browser")
PACKAGES = ("chromium", "fonts-liberation")  # without a font, text would not render in screenshots


class BrowserMissing(RuntimeError):
    """Chromium is not installed and could not be installed."""


def find_or_install() -> str:
    """The chromium binary; installs Debian's `chromium` package (as root) when there is none."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    apt = shutil.which("apt-get")
    if apt is None:
        raise BrowserMissing("chromium is not installed and there is no apt-get to install it")
    log = []
    for cmd in ([apt, "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", *PACKAGES],
                [apt, "-o", "DPkg::Lock::Timeout=600", "update"],
                [apt, "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", *PACKAGES]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                              env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        log.append(f"$ {' '.join(cmd)} -> {proc.returncode}\n{proc.stderr[-1500:]}")
        found = next((shutil.which(n) for n in NAMES if shutil.which(n)), None)
        if found:
            return found
    raise BrowserMissing("chromium could not be installed:\n" + "\n".join(log))


def _run(binary: str, args: list[str], timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="evo-chromium-") as profile:
        return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


def screenshot(binary: str, page: Path, out: Path, *, width: int = 1280, height: int = 4000) -> Path:
    proc = _run(binary, [f"--screenshot={out}", f"--window-size={width},{height}", page.resolve().as_uri()])
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return out


def dom(binary: str, page: Path) -> str:
    """The page's DOM once loaded and its scripts have run."""
    proc = _run(binary, ["--dump-dom", "--virtual-time-budget=5000", page.resolve().as_uri()])
    if "<html" not in proc.stdout:
        raise RuntimeError(f"chromium dumped no DOM (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout
