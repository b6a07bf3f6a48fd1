"""The widgets in a real JupyterLab, in Debian's chromium (Playwright, no browser download).

Book sections: "Placing Operations on Devices" (the placement explorer) and "Parallel
Execution" (Figure 12-5 step by step).  The notebook (``NOTEBOOK_CELLS``) is run from
the Run menu; the test then works the widgets as a reader would: it picks ``mul`` in the
explorer's "op" dropdown, pins it to ``/cpu:0`` and sees the table change; it clicks
"Next event" and sees the scheduler's state change.
"""

import json
import pathlib
import re
import time

import psutil
import pytest

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
STEP = 30_000  # ms: the bound on each wait in the page (60 s for the server's first answers)

NOTEBOOK_CELLS = [
    # 0: a private card registry (before minitf is imported) and two emulated GPUs
    "import os\n"
    "os.environ['MINITF_STATE_DIR'] = {state_dir!r}\n"
    "import minitf as tf\n"
    "from minitf.runtime.simulate import figure_12_5, simulate\n"
    "from minitf.viz import TimelineView\n"
    "from minitf.viz.widgets import PlacementExplorer, StepThrough\n"
    "tf.config.emulate_gpus(2)",
    # 1: the book's placement example
    "with tf.device('/cpu:0'):\n"
    "    a = tf.Variable(3.0, name='a')\n"
    "    b = tf.constant(4.0, name='b')\n"
    "c = a * b",
    # 2: the placement explorer
    "explorer = PlacementExplorer(num_gpus=2)\nexplorer",
    # 3: Figure 12-5, one event at a time
    "fig = tf.Graph()\n"
    "ops = figure_12_5(fig)\n"
    "sess = tf.Session(graph=fig)\n"
    "fetches = [ops[n].op for n in 'DEAB']\n"
    "book = dict(inter_op_threads=2, intra_op_threads=2, gpu_thread_mode='gpu_private',\n"
    "            gpu_thread_count=2)\n"
    "StepThrough(sess, fetches, **book)",
    # 4: the whole step as a static SVG
    "TimelineView(simulate(sess, fetches, **book))",
]


def write_code_notebook(lab, root, name, sources):
    """Writes ``sources`` (each formatted with ``state_dir``, a fresh ``MINITF_STATE_DIR`` under
    ``root``) as the code cells of a plain nbformat-4 notebook ``root/name`` for the lab's
    kernel."""
    state_dir = root / "minitf-state"
    state_dir.mkdir()
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "cell-%d" % i,
            "metadata": {},
            "outputs": [],
            "source": src.format(state_dir=str(state_dir)),
        }
        for i, src in enumerate(sources)
    ]
    spec = {"name": lab.kernel_name, "language": "python", "display_name": "minitf test"}
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": cells,
        "metadata": {"kernelspec": spec, "language_info": {"name": "python"}},
    }
    (root / name).write_text(json.dumps(nb, indent=1))


@pytest.fixture
def notebook(jupyterlab, tmp_path):
    """``(dir, name)`` of the widgets notebook, written into the server's root dir."""
    write_code_notebook(jupyterlab, tmp_path, "widgets.ipynb", NOTEBOOK_CELLS)
    return tmp_path, "widgets.ipynb"


def _wait_kernel_idle(lab, nb_name, timeout):
    """Waits until the notebook's kernel reports idle (it has started and imported nothing
    yet); returns the kernel's id."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        for s in lab.api("/api/sessions"):
            if s.get("path", "").endswith(nb_name) and s.get("kernel"):
                seen = s["kernel"]
                if seen.get("execution_state") == "idle":
                    return seen["id"]
        time.sleep(0.25)
    raise AssertionError(
        "the notebook's kernel was not idle within %d s (last seen: %s)\n%s"
        % (timeout, seen, lab.log_tail())
    )


def _open_and_run_all(page, lab, nb_name, n_cells, code_cells, timeout_ms=60_000):
    """Opens ``nb_name``, waits for its kernel, runs Run > Run All Cells and waits until the
    last code cell ran; fails with the outputs if a cell raised (JupyterLab shows a traceback
    as stderr; Run All stops at the first error)."""
    from playwright.sync_api import expect

    page.goto(lab.url("lab/tree/" + nb_name), timeout=60_000)
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(n_cells, timeout=60_000)
    _wait_kernel_idle(lab, nb_name, timeout=60)
    # the page has connected to the kernel too: the toolbar's indicator says idle
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible()
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item:visible", has_text=re.compile(r"^Run All Cells")).first.click()
    last = page.locator(
        ".jp-Notebook .jp-CodeCell .jp-InputArea-prompt", has_text="[%d]:" % code_cells
    )
    traceback = page.locator(
        ".jp-OutputArea-output[data-mime-type*='stderr']", has_text="Traceback"
    )
    try:
        expect(last.or_(traceback).first).to_be_attached(timeout=timeout_ms)
    except AssertionError as e:
        raise AssertionError(
            "%s did not run to the end within %d s; outputs:\n%s"
            % (nb_name, timeout_ms // 1000, _outputs_text(page))
        ) from e
    assert traceback.count() == 0, "a cell failed:\n%s" % _outputs_text(page)


def _outputs_text(page):
    return "\n---\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())[-4000:]


def _cell_output(page, i):
    return page.locator(".jp-Notebook .jp-Cell").nth(i).locator(".jp-OutputArea-output")


def _live_widget(output):
    """The ipywidgets view that the widget manager drew in ``output`` (a saved notebook, or a
    page without the widgets extension, would show the text/html fallback instead)."""
    return output.locator(":scope > .jupyter-widgets.widget-vbox")


def _widget_dropdown(scope, label):
    """The <select> of the ipywidgets Dropdown described as ``label``."""
    box = scope.locator(".widget-dropdown").filter(
        has=scope.page.locator("label", has_text=re.compile("^%s$" % re.escape(label)))
    )
    return box.locator("select")


def _assigned(explorer, op):
    """The explorer table's "assigned" cell for ``op``."""
    row = explorer.locator("table tr").filter(
        has=explorer.page.locator("td", has_text=re.compile("^%s$" % re.escape(op)))
    )
    return row.locator("td").nth(2)


@pytest.mark.slow
def test_widgets_in_jupyterlab(browser, jupyterlab, notebook, screenshot_dir):
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP)
    _, nb_name = notebook
    page = browser.new_page(viewport={"width": 1600, "height": 1600})
    page.set_default_timeout(STEP)
    console = []
    page.on(
        "console",
        lambda m: (
            console.append("%s: %s" % (m.type, m.text)) if m.type in ("error", "warning") else None
        ),
    )
    try:
        _open_and_run_all(page, jupyterlab, nb_name, len(NOTEBOOK_CELLS), len(NOTEBOOK_CELLS))
        prompts = page.locator(".jp-Notebook .jp-InputArea-prompt")
        for i in range(len(NOTEBOOK_CELLS)):
            expect(prompts.nth(i)).to_have_text("[%d]:" % (i + 1))

        # the placement explorer: live dropdowns and the placer's table
        explorer = _cell_output(page, 2)
        expect(_live_widget(explorer)).to_be_visible()  # not the static HTML fallback
        op, pin = _widget_dropdown(explorer, "op"), _widget_dropdown(explorer, "pin to")
        expect(op).to_be_visible()
        expect(pin).to_be_visible()
        expect(explorer.locator("svg").first).to_be_visible()
        expect(_assigned(explorer, "mul")).to_have_text(GPU0)
        expect(_assigned(explorer, "a")).to_have_text(CPU0)

        # the step-through: buttons and the state at t = 0
        stepper = _cell_output(page, 3)
        expect(_live_widget(stepper)).to_be_visible()
        next_event = stepper.get_by_role("button", name="Next event")
        expect(next_event).to_be_visible()
        state = stepper.locator(".widget-html").first
        expect(state).to_contain_text("t = 0 µs")
        expect(state).to_contain_text("last event: -")
        running = state.locator("table").first.locator("tr")  # header + one row per thread
        expect(running).to_have_count(1)
        expect(stepper.locator("svg line[stroke='red']")).to_have_count(1)

        # the static timeline: an SVG image that the browser decoded
        timeline = _cell_output(page, 4)
        img = timeline.locator("img")
        expect(img).to_be_visible()
        assert (img.get_attribute("src") or "").startswith("data:image/svg+xml"), img.get_attribute(
            "src"
        )[:80]
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=img.element_handle(), timeout=STEP
        )

        page.screenshot(path=str(screenshot_dir / "jupyterlab-widgets.png"))
        explorer.screenshot(path=str(screenshot_dir / "placement-explorer-gpu0.png"))
        stepper.screenshot(path=str(screenshot_dir / "step-through-t0.png"))
        timeline.screenshot(path=str(screenshot_dir / "timeline-view.png"))

        # interaction 1: pin mul to the CPU; the kernel re-places and the table follows
        op.select_option("mul")
        expect(op).to_have_value("mul")
        expect(pin).to_have_value("(as built)")
        pin.select_option("/cpu:0")
        expect(_assigned(explorer, "mul")).to_have_text(CPU0)
        expect(explorer.locator("pre").last).to_contain_text("mul: (Mul): " + CPU0)
        explorer.screenshot(path=str(screenshot_dir / "placement-explorer-mul-on-cpu.png"))

        # interaction 2: one scheduling event; the first source op starts on a GPU thread
        before = state.inner_text()
        next_event.click()
        expect(state).to_contain_text(re.compile(r"last event: start \S+ on GPU:\d inter-op"))
        expect(running).to_have_count(2)
        assert state.inner_text() != before
        stepper.screenshot(path=str(screenshot_dir / "step-through-after-next.png"))
    except Exception:
        try:
            page.screenshot(path=str(screenshot_dir / "failure.png"))
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        print("browser console errors/warnings:\n" + "\n".join(console[-30:]))
        print(jupyterlab.log_tail())
        raise
    finally:
        page.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "course_notebook",
    ["00_start_here.ipynb", "03_placing_operations.ipynb", "zh/03_placing_operations.ipynb"],
)
def test_course_notebooks_run_in_jupyterlab(
    browser, jupyterlab, tmp_path, course_notebook, screenshot_dir
):
    """The workshop's own notebooks 00 and 03 and 03's Chinese twin, outputs cleared, run top to
    bottom in JupyterLab from the Run menu; 03's placement explorer renders as a live widget with
    its graph (labelled in Chinese in the zh notebook), and one of its exercises is answered
    through the page until its check passes."""
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP)
    src = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / course_notebook
    course_notebook = course_notebook.replace("/", "_")  # zh/03_x -> zh_03_x, in the lab's root
    nb = json.loads(src.read_text())
    code_cells = 0
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            code_cells += 1
    nb["metadata"]["kernelspec"] = {
        "name": jupyterlab.kernel_name,
        "language": "python",
        "display_name": "minitf test",
    }
    (tmp_path / course_notebook).write_text(json.dumps(nb, indent=1))
    page = browser.new_page(viewport={"width": 1600, "height": 1600})
    page.set_default_timeout(STEP)
    try:
        _open_and_run_all(
            page, jupyterlab, course_notebook, len(nb["cells"]), code_cells, timeout_ms=90_000
        )
        if "03" in course_notebook:
            widgets = page.locator(".jp-OutputArea-output > .jupyter-widgets.widget-vbox")
            expect(widgets.first).to_be_attached()
            expect(widgets.first.locator("select").first).to_be_attached()
            expect(widgets.first.locator("svg").first).to_be_attached()
            if course_notebook.startswith("zh_"):  # the zh notebook's first cell: Chinese labels
                expect(widgets.first).to_contain_text("固定到")  # "pin to"
                widgets.first.scroll_into_view_if_needed()
                widgets.first.screenshot(path=str(screenshot_dir / "zh-03-placement-explorer.png"))
            _answer_exercise(page)
        else:
            expect(page.locator(".jp-OutputArea-output").first).to_be_attached()
    finally:
        page.close()


# Notebook 03's exercise 2 (predict the placer): its cell, its check and a learner's answer
EXERCISE_CELL = 'prediction = {"n": ..., "m": ..., "s": ...}'
EXERCISE_CHECK = "... in prediction.values()"
EXERCISE_ANSWER = 'prediction = {"n": "CPU:0", "m": "GPU:0", "s": "GPU:0"}'


def _answer_exercise(page):
    """Works notebook 03's exercise 2 as a learner: the check first says "Not answered yet";
    the answer is typed over the placeholder in the page, both cells are run with Shift+Enter
    and the check then reports the placer's placements as right."""
    from playwright.sync_api import expect

    cells = page.locator(".jp-Notebook .jp-CodeCell")
    expect(cells.filter(has_text=EXERCISE_CELL)).to_have_count(1)
    # by position, since typing the answer changes the text a filter would look for
    i = cells.evaluate_all("(els, t) => els.findIndex(e => e.innerText.includes(t))", EXERCISE_CELL)
    exercise, check = cells.nth(i), cells.nth(i + 1)
    expect(check).to_contain_text(EXERCISE_CHECK)
    expect(check.locator(".jp-OutputArea-output")).to_contain_text("Not answered yet")
    exercise.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.type(EXERCISE_ANSWER)
    expect(exercise.locator(".cm-content")).to_have_text(EXERCISE_ANSWER)
    page.keyboard.press("Shift+Enter")  # runs the answer; the check cell becomes the active one
    page.keyboard.press("Shift+Enter")  # runs the check
    expect(check.locator(".jp-OutputArea-output")).to_contain_text(
        "Right: {'n': 'CPU:0', 'm': 'GPU:0', 's': 'GPU:0'}"
    )
    expect(check.locator(".jp-OutputArea-output")).not_to_contain_text("Not answered yet")


def leftover_children(*words):
    """This process's live descendants whose command line mentions one of ``words``."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if any(w in cmd for w in words):
            out.append("%d: %s" % (p.pid, cmd[:200]))
    return out


def test_no_jupyter_or_chromium_left_behind():
    """The fixtures above stopped everything they started (runs after the browser test)."""
    left = leftover_children("jupyter", "ipykernel", "chromium", "chrome")
    assert not left, "processes left behind: %s" % left
