"""Real-browser harness for the browser tests: Playwright driving Debian's ``/usr/bin/chromium``
(no browser download), a fresh profile per browser, every request outside localhost refused and
recorded, console errors collected; and a JupyterLab server on 127.0.0.1 that is always stopped (the
session shares one: the ``jupyter`` fixture of ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .logs_util import free_port

__all__ = ["CHROMIUM", "LAUNCH_ARGS", "chromium_path", "BrowserSession", "browser", "JupyterServer",
           "jupyter_server", "free_port"]

CHROMIUM = os.environ.get("FXVIZ_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def chromium_path() -> str | None:
    """The Chromium executable the tests drive, or None when it is not installed."""
    path = CHROMIUM if os.path.isabs(CHROMIUM) else shutil.which(CHROMIUM)
    return path if path and os.access(path, os.X_OK) else None


@dataclass
class BrowserSession:
    """One Chromium with a fresh profile; what it logged and what it tried to fetch."""

    context: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.on("console", lambda m: self.console_errors.append(f"{m.text} @ {m.location}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.page_errors.append(f"{e}\n{getattr(e, 'stack', '')}"))

        def on_dialog(d: Any) -> None:  # an alert() would mean a model string ran as script
            self.dialogs.append(f"{d.type}: {d.message}")
            d.dismiss()

        page.on("dialog", on_dialog)
        return page


def _local(url: str) -> bool:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("file", "data", "blob", "about"):
        return True
    return parsed.hostname in _LOCAL_HOSTS


@contextlib.contextmanager
def browser(viewport: tuple[int, int] = (1500, 950)) -> Iterator[BrowserSession]:
    """Chromium through Playwright with the project's launch flags and a fresh ``--user-data-dir``;
    any request that leaves localhost is aborted and recorded in ``session.blocked``."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="fxviz-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=exe, headless=True, args=list(LAUNCH_ARGS),
                viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=1)
            session = BrowserSession(context)

            def gate(route: Any) -> None:
                url = route.request.url
                if _local(url):
                    route.continue_()
                else:
                    session.blocked.append(url)
                    route.abort()

            context.route("**/*", gate)
            try:
                yield session
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class JupyterServer:
    url: str
    token: str
    root: pathlib.Path
    process: subprocess.Popen
    log: pathlib.Path
    app: str = "jupyterlab"

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
        return json.loads(text) if text else None

    def lab_url(self, notebook: str, app: str | None = None) -> str:
        """The notebook's page (``notebook`` relative to ``root``): JupyterLab's, in a workspace of its own
        (no other test's notebook restored beside it), or Notebook 7's ``/notebooks/...`` (``app="notebook"``:
        a JupyterLab server serves Notebook 7 too, its server extension is on by default)."""
        path = urllib.parse.quote(notebook)
        if (app or self.app) == "jupyterlab":
            workspace = "".join(c if c.isalnum() else "-" for c in notebook)
            return f"{self.url}/lab/workspaces/{workspace}/tree/{path}?token={self.token}"
        return f"{self.url}/notebooks/{path}?token={self.token}"

    @contextlib.contextmanager
    def kernels_stopped(self) -> Iterator[None]:
        """Stop every kernel when the block ends (the server goes on for the next test)."""
        try:
            yield
        finally:
            self.stop_kernels()

    def stop_kernels(self) -> None:
        """Shut down every kernel the server runs (a test's notebook leaves its kernel running)."""
        for session in self.api("/api/sessions") or []:
            with contextlib.suppress(urllib.error.URLError, OSError):
                self.api(f"/api/sessions/{session['id']}", method="DELETE")
        for kernel in self.api("/api/kernels") or []:
            with contextlib.suppress(urllib.error.URLError, OSError):
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")


@contextlib.contextmanager
def jupyter_server(root: pathlib.Path, timeout: float = 120.0, app: str = "jupyterlab") -> Iterator[JupyterServer]:
    """JupyterLab (``app="jupyterlab"``) or Notebook 7 (``app="notebook"``) on 127.0.0.1 with a
    token, on a free port, rooted at ``root``, with its config,
    data and runtime dirs in fresh temp dirs (the venv's kernel and lab extensions stay visible
    through ``sys.prefix``).  Always stopped: shut down through its API, then terminated, then
    killed, by the process id this function started."""
    home = pathlib.Path(tempfile.mkdtemp(prefix="fxviz-jupyter-"))
    config, data, runtime, ipython = (home / d for d in ("config", "data", "runtime", "ipython"))
    for d in (config, data, runtime, ipython):
        d.mkdir()
    # no news, no update checks, no first-run toasts in the page under test (Notebook 7 shows
    # none; disabling a plugin there makes its settings loader throw)
    if app == "jupyterlab":
        (config / "labconfig").mkdir()
        (config / "labconfig" / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
        settings = data / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps(
            {"checkForUpdates": False, "fetchNews": "false", "doNotDisturbMode": True}))
        # every cell laid out in the page (JupyterLab 4 and Notebook 7 window long notebooks: cells off
        # screen are not in the DOM), so a test reads every cell's prompt and output from the page
        tracker = data / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(data),
               JUPYTER_RUNTIME_DIR=str(runtime), IPYTHONDIR=str(ipython), JUPYTER_PLATFORM_DIRS="1",
               PYTHONUNBUFFERED="1")
    env.pop("JUPYTER_PATH", None)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(data / "lab" / "user-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(data / "lab" / "workspaces")
    port = free_port()
    token = secrets.token_hex(16)
    log = home / "server.log"
    cmd = [sys.executable, "-m", app, "--no-browser", "--ServerApp.open_browser=False",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    if app == "jupyterlab":
        cmd += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI often run as root
        cmd.append("--allow-root")
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(root),
                                start_new_session=True)
    server = JupyterServer(url=f"http://127.0.0.1:{port}", token=token, root=root, process=proc, log=log, app=app)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                if time.monotonic() > deadline:
                    tail = log.read_text()[-3000:]
                    raise RuntimeError(f"JupyterLab did not answer in {timeout:g} s:\n{tail}") from exc
                time.sleep(0.5)
        yield server
    finally:
        _stop(server)
        shutil.rmtree(home, ignore_errors=True)


def _stop(server: JupyterServer) -> None:
    proc = server.process
    if proc.poll() is None:
        with contextlib.suppress(Exception):
            server.api("/api/shutdown", method="POST")  # stops its kernels too
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    # kernels run in the server's session (process group = the server's pid): end any left over
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
