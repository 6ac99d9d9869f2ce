"""Headless Chromium, as the page's end-to-end tests open it."""

import shutil
import subprocess

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-quic", "--hide-scrollbars"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(url, profile, *args):
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--enable-logging=stderr", "--v=0", *args, url],
                          capture_output=True, text=True, timeout=120)
