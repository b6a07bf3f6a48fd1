"""Tests for tensor lifetimes: ``minitf.runtime.tensor_lifetime`` and the two drivers using it.

Book sections: "Parallel Execution" and "Managing the GPU RAM".  A step drops each tensor once
its last reader has run (fetched tensors live to the end, a tensor handed to a ``_Send`` until
its ``_Recv`` has it), frees its allocation on a card, and lets an element-wise op write into
an input that dies with it (TF's input forwarding) -- never into one anything else still reads.
Each behaviour is checked with both drivers: the serial loop (cheap ops only) and the threaded
``StepRun`` (a plan with an expensive op; a tiny matmul is added to the fetches to get it).
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.framework.rendezvous import LocalRendezvous
from minitf.runtime.tensor_lifetime import Lifetimes, StepMemory

MiB = 1 << 20
DRIVERS = ["serial", "threaded"]


def _run(sess, fetches, feed=None, driver="serial"):
    """``sess.run(fetches)`` by the serial driver, or by the threaded one (a tiny matmul rides
    along: an expensive op puts the whole plan on the pools)."""
    if driver == "serial":
        assert not sess.plan(fetches, feed).any_expensive
        return sess.run(fetches, feed)
    with sess.graph.as_default(), tf.device("/cpu:0"):
        m = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="expensive")
    assert sess.plan([fetches, m], feed).any_expensive
    return sess.run([fetches, m], feed)[0]


def _alloc(sess, index=0):
    (gpu,) = [d for d in sess._impl.devices if d.name.endswith("GPU:%d" % index)]
    return gpu.allocator


# -- memory: a chain runs within a budget its intermediates exceed -----------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_chain_bigger_than_its_card_runs_within_it(fresh_cards, driver):
    """300 intermediates of 64 KiB (19 MiB) on an 8 MiB card: each dies once read, so the step
    never holds more than two; element-wise ops write into their dying input."""
    tf.config.emulate_gpus(1, memory_limit=8 * MiB)
    with tf.device("/gpu:0"):
        x = tf.placeholder(tf.float32, [128, 128])
        y = x
        for k in range(300):
            y = y * 1.001 if k % 2 else tf.square(y) * 0.5 + 0.25
    sess = tf.Session()
    value = np.full((128, 128), 0.5, np.float32)
    got = _run(sess, y, {x: value}, driver)
    want = value
    for k in range(300):
        want = (
            want * np.float32(1.001)
            if k % 2
            else np.square(want) * np.float32(0.5) + np.float32(0.25)
        )
    np.testing.assert_allclose(got, want, rtol=1e-5)
    alloc = _alloc(sess)
    constants = alloc.bytes_in_use  # the chain's 450 scalar constants: charged once, kept
    assert constants == 450 * 4
    assert alloc.peak_bytes_in_use <= 2 * 128 * 128 * 4 + constants < 300 * 128 * 128 * 4
    before = alloc.num_allocs
    _run(sess, y, {x: value}, driver)
    assert alloc.num_allocs - before <= 2  # the fed value and the first op; the rest forwarded
    assert alloc.bytes_in_use == constants
    sess.close()
    assert alloc.bytes_in_use == 0  # the constants went with the session's kernels


def test_matmul_chain_on_the_cpu_holds_a_few_intermediates():
    """100 chained 256x256 matmuls (25 MiB of results): numpy memory traced while the step runs
    stays near two results, and a second run does not grow it."""
    n = 256
    rs = np.random.RandomState(0)
    w_np = (rs.rand(n, n) * 2 / n).astype(np.float32)
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [n, n])
        w = tf.constant(w_np)
        y = x
        for _ in range(100):
            y = tf.matmul(y, w)
    sess = tf.Session()
    feed = {x: rs.rand(n, n).astype(np.float32) / n}
    sess.run(y, feed)
    tracemalloc.start()
    try:
        sess.run(y, feed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 * n * n * 4  # 1.5 MiB; every result kept would be 25 MiB


def test_a_fetched_result_the_step_alone_held_is_handed_over_without_a_copy():
    """A fetched matmul on the CPU: the caller gets the kernel's own buffer (traced memory of
    the run is one result, not two); a constant or a fed value is still copied, so writing to
    what a run returned never changes the graph or the caller's feed."""
    n = 512
    with tf.device("/cpu:0"):
        a = tf.constant(np.eye(n, dtype=np.float32))
        m = tf.matmul(a, a)
        p = tf.placeholder(tf.float32, [2])
        passed = tf.identity(p)
    sess = tf.Session()
    sess.run(m)
    tracemalloc.start()
    try:
        got = sess.run(m)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n * n * 4 <= peak < 1.5 * n * n * 4
    got[:] = 7.0
    np.testing.assert_array_equal(sess.run(m), np.eye(n))
    c = sess.run(a)
    c[:] = 7.0
    np.testing.assert_array_equal(sess.run(a), np.eye(n))
    fed = np.ones(2, np.float32)
    out = sess.run(passed, {p: fed})
    out[:] = 3.0
    np.testing.assert_array_equal(fed, 1.0)


# -- what must survive -------------------------------------------------------------------------


DEVICES = ["/cpu:0", "/gpu:0"]  # on the CPU a fetch is read in place; a GPU's crosses over


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_fetched_intermediate_survives_its_readers(driver, device):
    """``a`` is fetched and read by an op that could otherwise write into it."""
    with tf.device(device):
        x = tf.placeholder(tf.float32, [64, 64])
        a = x * 2.0
        b = a + 1.0
        c = b * 3.0
    value = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    with tf.Session() as sess:
        got_a, got_c = _run(sess, [a, c], {x: value}, driver)
    np.testing.assert_array_equal(got_a, value * 2)
    np.testing.assert_array_equal(got_c, (value * 2 + 1) * 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("driver", DRIVERS)
def test_forwarding_never_overwrites_what_another_reader_needs(driver, device):
    """Fetch both sides of every sharing: two readers, an Identity alias, a value read twice by
    one op, a constant, a fed array and a variable all keep their values."""
    value = np.linspace(0, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
    original = value.copy()
    const_np = np.full((32, 32), 7.0, np.float32)
    with tf.device(device):
        x = tf.placeholder(tf.float32, [32, 32])
        v = tf.Variable(np.ones((32, 32), np.float32))
        a = x * 2.0
        alias = tf.identity(a)
        two = [a + 1.0, a * 3.0]
        twice = (x * 5.0) * (x * 5.0)
        doubled = tf.square(x * 4.0) + (x * 4.0)  # the square's input is read again by the add
        from_const = tf.constant(const_np) + 1.0
        from_var = v + 1.0
        six = x * 6.0
        # a sum over no axes hands its input on (TF's "reduces nothing"): the add after it
        # must not write into the buffer the multiplication still reads
        bumped = tf.reduce_sum(six, axis=[]) + 1.0
        with tf.control_dependencies([bumped]):
            over_nothing = [bumped, six * 2.0]
    fetches = [alias, two, twice, doubled, from_const, from_var, over_nothing]
    with tf.Session() as sess:
        sess.run(v.initializer)
        for _ in range(2):
            got = _run(sess, fetches, {x: value}, driver)
            np.testing.assert_array_equal(got[0], value * 2)
            np.testing.assert_array_equal(got[1][0], value * 2 + 1)
            np.testing.assert_array_equal(got[1][1], value * 2 * 3)
            np.testing.assert_array_equal(got[2], (value * 5) * (value * 5))
            np.testing.assert_array_equal(got[3], np.square(value * 4) + value * 4)
            np.testing.assert_array_equal(got[4], const_np + 1)
            np.testing.assert_array_equal(got[5], 2.0)
            np.testing.assert_array_equal(got[6][0], value * 6 + 1)
            np.testing.assert_array_equal(got[6][1], value * 6 * 2)
        np.testing.assert_array_equal(value, original)
        np.testing.assert_array_equal(sess.run(v), 1.0)
    np.testing.assert_array_equal(const_np, 7.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("driver", DRIVERS)
def test_sgd_writes_lr_times_a_dying_gradient_into_its_buffer_never_a_fetched_one(driver, device):
    """``minimize``'s update reads the weights' gradient through the Identity of the
    gradients' ``tuple``: ``ApplyGradientDescent`` may use that buffer for ``lr * grad`` (no
    variable-sized temporary), but a fetched gradient keeps its value."""
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((8, 5)).astype(np.float32)
    w0 = rng.standard_normal((8, 5)).astype(np.float32)
    with tf.device(device):
        x = tf.placeholder(tf.float32, [8, 5])
        w = tf.Variable(w0)
        loss = tf.reduce_sum(tf.square(x * w))
        opt = tf.train.GradientDescentOptimizer(0.125)
        ((grad, _),) = opt.compute_gradients(loss, [w])
        train = opt.minimize(loss)
    expected_grad = 2 * xv * xv * w0
    with tf.Session() as sess:
        sess.run(w.initializer)
        plan = sess.plan([train], {x: xv})
        updates = [i for i, n in enumerate(plan.names) if n.endswith("ApplyGradientDescent")]
        assert [plan.lifetimes.forward[i] for i in updates] == [2]
        _run(sess, train, {x: xv}, driver)
        np.testing.assert_allclose(sess.run(w), w0 - 0.125 * expected_grad, rtol=1e-5)
        sess.run(w.initializer)
        got, _ = _run(sess, [grad, opt.apply_gradients([(grad, w)])], {x: xv}, driver)
        np.testing.assert_allclose(got, expected_grad, rtol=1e-5)  # not 0.125 times it
        np.testing.assert_allclose(sess.run(w), w0 - 0.125 * expected_grad, rtol=1e-5)


def test_a_value_sent_to_another_card_lives_until_its_recv_has_it(fresh_cards, monkeypatch):
    """GPU:0's tensor is still charged to GPU:0 when the ``_Recv`` on GPU:1 receives it, and
    freed after; at the end of the step neither card holds anything."""
    tf.config.emulate_gpus(2, memory_limit=64 * MiB)
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, shape=[256, 256], name="ones") * 2.0
        a = tf.identity(a * 1.0, name="sent")
    with tf.device("/gpu:1"):
        b = a + 1.0
    sess = tf.Session()
    alloc0 = None
    seen = []
    recv_async = LocalRendezvous.recv_async

    def watched(self, key, done):
        def arrived(value, error):
            if ";sent:0;" in key and alloc0 is not None:
                seen.append([op for _, _, op, _, _ in alloc0.live_allocations()])
            done(value, error)

        recv_async(self, key, arrived)

    sess.run(b)  # first run: the cards' allocators exist from now on
    alloc0 = _alloc(sess, 0)
    monkeypatch.setattr(LocalRendezvous, "recv_async", watched)
    np.testing.assert_array_equal(sess.run(b), 3.0)
    # "sent" is an Identity of mul_1, which wrote into mul's buffer: that allocation is live
    assert len(seen) == 1 and "mul" in seen[0]
    # after the step only the constants (charged once, for the session) are left
    constants = {"ones", "mul/y", "mul_1/y"}
    assert {op for _, _, op, _, _ in alloc0.live_allocations()} == constants
    assert _alloc(sess, 1).bytes_in_use == 4  # add/y


# -- the static analysis -----------------------------------------------------------------------


def test_lifetimes_count_reads_pin_fetches_and_pick_what_to_forward():
    # 0 -> 1 -> 2 (fetched), 0 -> 3 (an Identity: it allocates nothing), 1 read twice by 4
    inputs = [[], [(0, 0)], [(1, 0)], [(0, 0)], [(1, 0), (1, 0)]]
    allocates = [True, True, True, False, True]
    forwards = [(), (0,), (0,), (), (0, 1)]
    life = Lifetimes(inputs, allocates, forwards, [False] * 5, fetched=[2])
    assert life.uses == [2, 3, 0, 0, 0]
    assert life.pinned == [False, False, True, False, False]
    # 1 may not take 0's buffer (the Identity 3 aliases it); 2 may take 1's; 4 reads 1 twice
    assert life.forward == [-1, -1, 0, -1, -1]
    order = [0, 1, 2, 4, 3]
    dead = life.deaths(order, inputs)
    assert dead[2] is None  # fetched: lives to the end
    assert dead[4] == (4, 1) and dead[3] == (3, 0)


def test_lifetimes_forward_through_identities_that_only_pass_a_buffer_on():
    # 0 (allocates) -> 1 (Identity) -> 2 (Identity) -> 3 (an update: writes into input 0,
    # allocates nothing itself)
    inputs = [[], [(0, 0)], [(1, 0)], [(2, 0)]]
    allocates, forwards = [True, False, False, False], [(), (), (), (0,)]
    aliases = [False, True, True, False]
    life = Lifetimes(inputs, allocates, forwards, [False] * 4, [], aliases=aliases)
    assert life.forward == [-1, -1, -1, 0]
    # not without knowing that 1 and 2 are aliases, nor with the buffer fetched anywhere
    assert Lifetimes(inputs, allocates, forwards, [False] * 4, []).forward[3] == -1
    for fetched in ([0], [1], [2]):
        life = Lifetimes(inputs, allocates, forwards, [False] * 4, fetched, aliases=aliases)
        assert life.forward[3] == -1
    for reader in (0, 1):  # nor when node 4 (allocating) reads the buffer or the first alias
        life = Lifetimes(
            inputs + [[(reader, 0)]],
            allocates + [True],
            forwards + [()],
            [False] * 5,
            [],
            aliases=aliases + [False],
        )
        assert life.forward[3] == -1


def test_lifetimes_keep_a_sent_value_until_its_recv_and_never_forward_scalars():
    # 0 -> 1 (_Send); 2 (_Recv) in the same plan; 0 -> 3
    inputs = [[], [(0, 0)], [], [(0, 0)]]
    life = Lifetimes(inputs, [True, False, False, True], [(), (), (), (0,)], [False] * 4, [])
    assert life.forward == [-1, -1, -1, -1]  # the _Send keeps a reference: no forwarding
    life = Lifetimes(inputs, [True] * 4, [(), (), (), (0,)], [False] * 4, [], send_recv=[(1, 2)])
    assert life.uses[0] == 3 and life.kept_until == {2: 0}
    dead = life.deaths([0, 1, 3, 2], inputs)
    assert 0 in dead[2] and 0 not in (dead[1] or ()) + (dead[3] or ())
    scalars = Lifetimes([[], [(0, 0)]], [True, True], [(), (0,)], [True, True], [])
    assert scalars.forward == [-1, -1]


def test_step_memory_shares_aliases_and_frees_once():
    class Allocator:
        def __init__(self):
            self.live, self.next = {}, 0

        def allocate(self, nbytes, name, shape, dtype):
            self.next += 1
            self.live[self.next] = name
            return self.next

        def free(self, token):
            del self.live[token]

    alloc, other = Allocator(), Allocator()
    memory = StepMemory()
    a = np.zeros(4)
    memory.account(0, alloc, "a", (a,))
    memory.account(1, alloc, "alias", (a,))  # the same buffer: no new allocation
    memory.account(2, other, "copy", (a,))  # another card: charged there too
    assert alloc.live == {1: "a"} and other.live == {1: "copy"}
    memory.release(0)
    assert alloc.live == {1: "a"}  # node 1 still holds it
    memory.release(1)
    assert alloc.live == {} and memory.live_nodes() == [2]
    memory.release_all()
    assert other.live == {} and memory.live_nodes() == []


# -- any graph: values agree with numpy whatever is forwarded -----------------------------------

_OPS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "neg": (lambda a, b: -a, lambda a, b: -a),
    "square": (lambda a, b: tf.square(a), lambda a, b: np.square(a)),
    "identity": (lambda a, b: tf.identity(a), lambda a, b: a),
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(_OPS)), st.integers(0, 1000), st.integers(0, 1000)),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(0, 1000), min_size=1, max_size=4),
    st.sampled_from(DRIVERS),
    st.sampled_from(DEVICES),
)
def test_any_graph_of_elementwise_ops_computes_what_numpy_does(steps, fetched, driver, device):
    """Random DAGs over two fed arrays, random fetches: every fetched value, and the feeds
    themselves, are what numpy says."""
    tf.reset_default_graph()
    feeds = [np.full((3, 4), 1.5, np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)]
    with tf.device(device):
        nodes = [tf.placeholder(tf.float32, [3, 4]), tf.placeholder(tf.float32, [3, 4])]
        values = [f.copy() for f in feeds]
        for name, i, j in steps:
            make, ref = _OPS[name]
            a, b = i % len(nodes), j % len(nodes)
            nodes.append(make(nodes[a], nodes[b]))
            values.append(ref(values[a], values[b]))
    picks = [k % len(nodes) for k in fetched]
    with tf.Session() as sess:
        got = _run(sess, [nodes[k] for k in picks], dict(zip(nodes[:2], feeds)), driver)
    for k, g in zip(picks, got):
        np.testing.assert_allclose(g, values[k], rtol=1e-6)
    np.testing.assert_array_equal(feeds[0], 1.5)
    np.testing.assert_array_equal(feeds[1], np.arange(12).reshape(3, 4))
