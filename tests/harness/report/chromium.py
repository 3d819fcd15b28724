"""Drive headless Chromium over the DevTools protocol on a pipe (no websocket library, no open port).

`--remote-debugging-pipe` makes Chromium read JSON commands on fd 3 and write replies and events
on fd 4, each message ending in a NUL byte. That is enough to open a page, collect every console
message, uncaught exception and log entry, evaluate JavaScript and take a full-page screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe")


def find_chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser", "google-chrome")
                 if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium with one page; a context manager that always kills the browser."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900, timeout: float = 45.0):
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._profile = tempfile.mkdtemp(prefix="dpgym-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child: its fd 3 reads our commands, its fd 4 carries replies
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes, close_fds=False, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=self.session)
        self.call("Emulation.setDeviceMetricsOverride", session=self.session, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close")
        except (OSError, TimeoutError, RuntimeError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        wanted = self._next_id
        reply = self._wait(lambda m: m.get("id") == wanted)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def _wait(self, matches: Any) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if matches(message):
                    return message
                self.events.append(message)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            if select.select([self._from_browser], [], [], min(left, 1.0))[0]:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the pipe (crashed or exited)")
                self._buffer += chunk

    def open(self, path: Path) -> None:
        """Navigate to a local file and wait for its load event."""
        self.call("Page.navigate", session=self.session, url=Path(path).resolve().as_uri())
        self._wait(lambda m: m.get("method") == "Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=self.session, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and error log entries seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(f"exception: {details.get('exception', {}).get('description', details.get('text'))}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
        return found

    def screenshot(self, path: Path, full_page: bool = True) -> bytes:
        shot = self.call("Page.captureScreenshot", session=self.session, format="png",
                         captureBeyondViewport=full_page)
        data = base64.b64decode(shot["data"])
        Path(path).write_bytes(data)
        return data
