"""tf.train.Coordinator and LooperThread (reference/tf1_semantics_part2.md §15.1), and
report_uninitialized_variables, what a SessionManager asks before it calls a model ready
(§20.3)."""

import threading

import numpy as np
import pytest

import minitf as tf
from minitf.train.coordinator import Coordinator, LooperThread
from minitf.train.session_manager import SessionManager


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def test_first_exception_wins_and_join_reraises_it():
    coord = Coordinator()
    for err in (ValueError("first"), KeyError("second")):
        try:
            raise err
        except Exception as e:  # noqa: BLE001
            coord.request_stop(e)
    assert coord.should_stop() and coord.wait_for_stop(0)
    with pytest.raises(ValueError, match="first"):
        coord.join()
    assert coord.joined


def test_out_of_range_is_a_clean_stop():
    coord = Coordinator()
    try:
        raise tf.errors.OutOfRangeError(None, None, "done")
    except tf.errors.OutOfRangeError as e:
        coord.request_stop(e)
    assert coord.should_stop()
    coord.join()  # nothing raised
    strict = Coordinator(clean_stop_exception_types=[])
    try:
        raise tf.errors.OutOfRangeError(None, None, "done")
    except tf.errors.OutOfRangeError as e:
        strict.request_stop(e)
    with pytest.raises(tf.errors.OutOfRangeError):
        strict.join()


def test_request_stop_with_an_exception_not_being_handled_is_tf_s_type_error():
    coord = Coordinator()
    with pytest.raises(TypeError, match="not all arguments converted"):
        coord.request_stop(ValueError("x"))
    assert not coord.should_stop()


def test_stop_on_exception_and_clear_stop():
    coord = Coordinator()
    with coord.stop_on_exception():
        raise RuntimeError("in a thread")
    assert coord.should_stop()
    with pytest.raises(RuntimeError, match="in a thread"):
        coord.raise_requested_exception()
    coord.clear_stop()
    assert not coord.should_stop()
    coord.raise_requested_exception()  # nothing stored any more


def test_threads_stopped_by_one_of_them():
    coord = Coordinator()
    counts = [0, 0]

    def worker(i):
        while not coord.should_stop():
            counts[i] += 1
            if i == 1 and counts[1] >= 50:
                coord.request_stop()
            coord.wait_for_stop(0.001)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    coord.join(threads, stop_grace_period_secs=5)
    assert counts[1] >= 50 and not any(t.is_alive() for t in threads)


def test_join_names_threads_that_outlive_the_grace_period():
    coord = Coordinator()
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, name="stuck-one", daemon=True)
    stuck.start()
    coord.register_thread(stuck)
    coord.request_stop()
    with pytest.raises(
        RuntimeError, match="Coordinator stopped with threads still running: stuck-one"
    ):
        coord.join(stop_grace_period_secs=0.05)
    release.set()
    stuck.join()
    coord2 = Coordinator()
    stuck2 = threading.Thread(target=release.wait, daemon=True)
    coord2.request_stop()
    coord2.join([stuck2], stop_grace_period_secs=0.01, ignore_live_threads=True)


def test_after_join_a_new_error_is_raised_at_once():
    coord = Coordinator()
    coord.request_stop()
    coord.join()
    try:
        raise ValueError("late")
    except ValueError:
        import sys

        with pytest.raises(ValueError, match="late"):
            coord.request_stop(sys.exc_info())


def test_looper_thread_calls_its_target_until_the_stop():
    coord = Coordinator()
    calls = []

    def target(tag):
        calls.append(tag)
        if len(calls) == 3:
            coord.request_stop()

    looper = LooperThread.loop(coord, 0.001, target, args=("tick",))
    assert looper.daemon
    coord.join(stop_grace_period_secs=5)
    assert calls == ["tick"] * 3
    with pytest.raises(ValueError, match="'coord' argument must be a Coordinator"):
        LooperThread(object(), 1.0)


def test_looper_thread_hands_its_exception_to_the_coordinator():
    coord = Coordinator()

    def target():
        raise tf.errors.InvalidArgumentError(None, None, "bad step")

    LooperThread.loop(coord, None, target)
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad step"):
        coord.join(stop_grace_period_secs=5)


# -- readiness -----------------------------------------------------------------------------


def test_report_uninitialized_variables_names_them():
    w = tf.Variable(1.0, name="w")
    b = tf.Variable(2.0, name="b")
    report = tf.report_uninitialized_variables()
    assert report.op.name == "report_uninitialized_variables/boolean_mask/GatherV2"
    assert report.dtype == tf.string
    with tf.Session() as sess:
        assert sess.run(report).tolist() == [b"w", b"b"]
        sess.run(w.initializer)
        assert sess.run(report).tolist() == [b"b"]
        sess.run(b.initializer)
        assert sess.run(report).size == 0
    with tf.Graph().as_default():
        empty = tf.report_uninitialized_variables()
        with tf.Session() as sess:
            assert sess.run(empty).size == 0


def test_selection_ops():
    x = tf.constant([[1, 2], [3, 4], [5, 6]])
    mask = tf.constant([True, False, True])
    picked = tf.boolean_mask(x, mask)
    sq = tf.squeeze(tf.constant([[[1], [2]]]), axis=[0, 2])
    with tf.Session() as sess:
        got = sess.run([picked, tf.logical_not(mask), tf.gather(x, [2, 0]), sq])
    assert got[0].tolist() == [[1, 2], [5, 6]]
    assert got[1].tolist() == [False, True, False]
    assert got[2].tolist() == [[5, 6], [1, 2]] and got[3].tolist() == [1, 2]
    with pytest.raises(
        ValueError, match=r"Can not squeeze dim\[0\], expected a dimension of 1, got 3"
    ):
        tf.squeeze(x, axis=[0])
    bad = tf.gather(x, tf.constant([3]))
    with (
        tf.Session() as sess,
        pytest.raises(tf.errors.InvalidArgumentError, match=r"indices = 3 is not in \[0, 3\)"),
    ):
        sess.run(bad)


def test_session_manager_prepares_a_ready_session():
    w = tf.Variable([1.0, 2.0], name="w")
    init = tf.global_variables_initializer()
    manager = SessionManager(ready_op=tf.report_uninitialized_variables())
    sess = manager.prepare_session("", init_op=init)
    np.testing.assert_allclose(sess.run(w), [1.0, 2.0])
    sess.close()
    with pytest.raises(RuntimeError, match="no init_op or init_fn or local_init_op was given"):
        manager.prepare_session("")
    with pytest.raises(
        RuntimeError, match="Init operations did not make model ready.*Variables not initialized: w"
    ):
        manager.prepare_session("", init_op=tf.no_op())
    with pytest.raises(
        ValueError, match="Can not provide both checkpoint_dir and checkpoint_filename_with_path."
    ):
        manager.prepare_session(
            "", init_op=init, saver=object(), checkpoint_dir="a", checkpoint_filename_with_path="b"
        )


def test_session_manager_init_fn_and_local_init():
    w = tf.Variable(0.0, name="w")
    counter = tf.Variable(5, name="counter", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    local_init = tf.local_variables_initializer()
    manager = SessionManager(
        ready_op=tf.report_uninitialized_variables(),
        local_init_op=local_init,
        ready_for_local_init_op=tf.report_uninitialized_variables(tf.global_variables()),
    )
    sess = manager.prepare_session("", init_fn=lambda s: s.run(w.initializer))
    assert sess.run([w, counter]) == [0.0, 5]
    sess.close()
    with pytest.raises(
        RuntimeError, match="did not make model ready for local_init.*Variables not initialized: w"
    ):
        manager.prepare_session("", init_op=tf.no_op())
    with pytest.raises(ValueError, match="you must also pass a local_init_op"):
        SessionManager(ready_for_local_init_op=tf.report_uninitialized_variables())


def test_wait_for_session_gives_up_after_its_deadline():
    tf.Variable(0.0, name="w")
    manager = SessionManager(ready_op=tf.report_uninitialized_variables(), recovery_wait_secs=0.01)
    with pytest.raises(
        tf.errors.DeadlineExceededError, match="Session was not ready after waiting 0 secs."
    ):
        manager.wait_for_session("", max_wait_secs=0)


def test_session_run_hook_pieces():
    args = tf.train.SessionRunArgs(fetches=["a"])
    assert args.feed_dict is None and args.options is None
    context = tf.train.SessionRunContext(args, session="sess")
    assert context.original_args is args and context.session == "sess"
    assert not context.stop_requested
    context.request_stop()
    assert context.stop_requested
    hook = tf.train.SessionRunHook()
    assert hook.before_run(context) is None
    values = tf.train.SessionRunValues(results=1, options=None, run_metadata=None)
    assert values.results == 1
