"""A JupyterLab server and Debian's chromium for the real-browser tests.

* ``jupyterlab``: JupyterLab started on the test's tmp dir (127.0.0.1, a free port, a random
  token, a kernelspec ``jupyterlab.kernel_name`` running this very Python), stopped afterwards
  with its kernels;
* ``browser``: headless ``/usr/bin/chromium`` (Debian's, never a downloaded one) driven by
  Playwright.

Every wait is bounded; both fixtures check in their teardown that none of their processes is
left.  Screenshots go to ``$MINITF_SCREENSHOT_DIR`` (default: the test's tmp dir).
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

import minitf

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KERNEL_NAME = "minitf-test-python"  # a kernelspec written for the server: sys.executable
REPO_ROOT = Path(minitf.__file__).resolve().parent.parent
SERVER_START_TIMEOUT = 60  # s; JupyterLab's first start on 2 cores takes a few seconds

# JupyterLab user settings: no news/update toasts over the page, every cell attached to the DOM
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items):
    """Every test under tests/browser is a ``browser`` test (``make check`` leaves them out)."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.browser)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, n=4000):
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError as e:
        return "(no log: %s)" % e


def _stop(procs, timeout=10):
    """SIGTERM then SIGKILL ``procs`` (psutil.Process); returns those still alive."""
    procs = [p for p in procs if p.is_running()]
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(alive, timeout=5)
    return alive


class JupyterLab:
    """A running JupyterLab: ``url(path)``, ``api(path)``, ``log_tail()``, ``kernel_name``."""

    kernel_name = KERNEL_NAME

    def __init__(self, root, port, token, log):
        self.root, self.port, self.token, self.log = root, port, token, log
        self.base = "http://127.0.0.1:%d" % port

    def url(self, path):
        return "%s/%s?token=%s" % (self.base, path.lstrip("/"), self.token)

    def api(self, path, method="GET", timeout=5):
        req = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": "token " + self.token}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self):
        return "--- JupyterLab log (%s) ---\n%s" % (self.log, _tail(self.log))


@pytest.fixture
def jupyterlab(tmp_path, tmp_path_factory):
    """JupyterLab on the test's tmp dir, with a kernel running this Python (``sys.executable``,
    this checkout's minitf first on its path); stopped, kernels included, afterwards."""
    root = tmp_path
    home = tmp_path_factory.mktemp("jupyter-home")
    kernel_dir = home / "data" / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "minitf test",
                "language": "python",
            }
        )
    )
    for rel, settings in USER_SETTINGS.items():
        f = home / "settings" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(settings))
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        PYTHONPATH=os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    port, token = _free_port(), secrets.token_hex(24)
    log = home / "jupyterlab.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        "--port=%d" % port,
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=" + token,
        "--ServerApp.root_dir=" + str(root),
        "--LabApp.user_settings_dir=" + str(home / "settings"),
        "--LabApp.workspaces_dir=" + str(home / "workspaces"),
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--MappingKernelManager.default_kernel_name=" + KERNEL_NAME,
    ]
    with open(log, "wb") as out:
        server = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    lab = JupyterLab(root, port, token, log)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if server.poll() is not None:
                pytest.fail(
                    "JupyterLab exited with status %s before answering\n%s"
                    % (server.returncode, lab.log_tail())
                )
            try:
                lab.api("/api/status", timeout=2)
                break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    "JupyterLab did not answer /api/status on port %d within %d s\n%s"
                    % (port, SERVER_START_TIMEOUT, lab.log_tail())
                )
            time.sleep(0.25)
        yield lab
    finally:
        _shutdown(server, lab)


def _shutdown(server, lab):
    """Stops JupyterLab (asking it first, so it shuts its kernels down) and then whatever of
    its process tree is left; fails if anything survives."""
    try:
        tree = [psutil.Process(server.pid)] + psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    if server.poll() is None:
        try:
            lab.api("/api/shutdown", method="POST", timeout=5)
        except (urllib.error.URLError, OSError):
            pass
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(server.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    alive = _stop(tree)
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    assert not alive, "JupyterLab processes survived shutdown: %s" % alive


@pytest.fixture
def browser():
    """Headless Debian chromium under Playwright; closed afterwards, no chromium left."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            "%s is missing: install Debian's chromium (apt-get install -y chromium); "
            "the browser test never downloads a browser" % CHROMIUM
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, timeout=30_000
        )
        procs = _chromium_processes()
        try:
            exes = {_exe(p) for p in procs}
            assert exes and all(e.startswith("/usr/lib/chromium/") for e in exes), (
                "expected Debian's chromium (/usr/lib/chromium) to run, found %s" % exes
            )
            yield b
        finally:
            procs += _chromium_processes()  # with the pages' renderers
            b.close()
    alive = _stop(procs)
    assert not alive, "chromium processes survived browser.close(): %s" % alive


def _exe(p):
    try:
        return p.exe()
    except psutil.Error:
        return "?"


def _chromium_processes():
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name():
                out.append(p)
        except psutil.Error:
            pass
    return out


@pytest.fixture
def screenshot_dir(tmp_path):
    d = Path(os.environ.get("MINITF_SCREENSHOT_DIR") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d
