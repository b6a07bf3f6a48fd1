"""minitf: the TF1 graph engine of the "Distributing TensorFlow Across Devices and Servers"
chapter, small enough to read and run anywhere.  Use it as ``import minitf as tf``.

The layout mirrors TensorFlow's: ``framework`` (graphs, devices, dtypes, errors), ``ops`` (op
constructors), ``kernels`` (implementations per device type), ``runtime`` (devices, placer,
scheduler, executor, session).
"""

import sys as _sys  # noqa: E402

import minitf.kernels  # noqa: F401  (registers the kernels)
from minitf import (  # noqa: F401
    config,
    contrib,
    data,
    device_lib,
    layers,
    losses,
    nn,
    queue,
    test,
    train,
)
from minitf import distributed as _distributed  # noqa: F401  (registers GRPC_SESSION)
from minitf.framework import dtypes, errors, tensor_shape  # noqa: F401
from minitf.framework.device_spec import DeviceSpec
from minitf.framework.dtypes import (
    DType,
    as_dtype,
    bool,  # noqa: A004 - TF's dtype name
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    resource,
    string,
    uint8,
    uint16,
    variant,
)
from minitf.framework.graph import (
    Graph,
    GraphKeys,
    NodeDef,
    Operation,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    get_default_session,
    name_scope,
    reset_default_graph,
)
from minitf.framework.sparse_tensor import SparseTensor, SparseTensorValue
from minitf.framework.tensor_shape import Dimension, TensorShape
from minitf.framework.tensor_spec import TensorSpec
from minitf.ops import math_ops as _math_ops
from minitf.ops import nn_ops as _nn_ops
from minitf.ops.accumulator_ops import ConditionalAccumulator, ConditionalAccumulatorBase
from minitf.ops.array_ops import (
    boolean_mask,
    concat,
    constant,
    expand_dims,
    fill,
    gather,
    identity,
    logical_not,
    ones,
    ones_like,
    placeholder,
    placeholder_with_default,
    rank,
    reshape,
    shape,
    size,
    squeeze,
    stack,
    stop_gradient,
    tile,
    zeros,
    zeros_like,
)
from minitf.ops.assert_ops import Assert
from minitf.ops.case import case
from minitf.ops.clip_ops import clip_by_global_norm, clip_by_norm, clip_by_value, global_norm
from minitf.ops.cond import cond
from minitf.ops.control_flow_ops import group, no_op, with_dependencies
from minitf.ops.control_flow_ops import tuple_ as tuple  # noqa: A004 - TF's name
from minitf.ops.data_flow_ops import (
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
)
from minitf.ops.dynamic_stitch import dynamic_stitch
from minitf.ops.gradients_impl import AggregationMethod, UnconnectedGradients, gradients
from minitf.ops.init_ops import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from minitf.ops.math_ops import (
    add,
    add_n,
    cast,
    divide,
    floordiv,
    matmul,
    multiply,
    negative,
    reduce_mean,
    reduce_prod,
    reduce_sum,
    square,
    subtract,
    truediv,
)
from minitf.ops.math_ops import range_ as range  # noqa: A004 - TF's name
from minitf.ops.parsing_ops import decode_csv, decode_raw
from minitf.ops.partitioned_variables import fixed_size_partitioner, min_max_variable_partitioner
from minitf.ops.random_ops import (
    random_normal,
    random_shuffle,
    random_uniform,
    set_random_seed,
    truncated_normal,
)
from minitf.ops.reader_ops import (
    FixedLengthRecordReader,
    IdentityReader,
    ReaderBase,
    TextLineReader,
    TFRecordReader,
    WholeFileReader,
)
from minitf.ops.script_ops import py_func
from minitf.ops.split_ops import split, unstack
from minitf.ops.state_ops import assign, assign_add, assign_sub, count_up_to
from minitf.ops.string_ops import string_split
from minitf.ops.transpose import invert_permutation, transpose
from minitf.ops.variable_scope import (
    AUTO_REUSE,
    VariableScope,
    get_variable,
    get_variable_scope,
    variable_scope,
)
from minitf.ops.variables import (
    Variable,
    all_variables,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    is_variable_initialized,
    local_variables,
    local_variables_initializer,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)
from minitf.runtime import direct_session as _direct_session  # noqa: F401  (DIRECT_SESSION)
from minitf.runtime import trace as timeline  # tf.timeline.Timeline, as TF's client.timeline
from minitf.runtime.config_proto import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
    ThreadPoolOptionProto,
)
from minitf.runtime.session import InteractiveSession, Session
from minitf.version import __version__  # noqa: E402,F401

_sys.modules[__name__ + ".timeline"] = timeline  # `from minitf.timeline import Timeline` too

# -- summaries, event files, TFRecord files: tf.summary, tf.python_io, tf.Summary ... and the
# pre-1.0 summary names that TF 1.15 no longer has (reference §20.2), kept so that seed 003's
# `tf.merge_all_summaries()` and the blog posts of that time run.
from minitf import python_io, summary  # noqa: E402
from minitf.lib.protobuf.tf_protos_pb2 import Event, HistogramProto, SessionLog, Summary  # noqa: E402
from minitf.ops.summary_ops import (  # noqa: E402
    histogram_summary,
    merge_all_summaries,
    merge_summary,
    scalar_summary,
)


def __getattr__(name):
    # ``tf.smi()``: imported on first use, so ``python -m minitf.smi`` does not import it twice.
    if name == "smi":
        import importlib

        return importlib.import_module("minitf.smi")
    raise AttributeError("module 'minitf' has no attribute %r" % name)


def device(device_name_or_function):
    """``with tf.device(x):`` pins the ops created inside to a device.

    ``x`` is a device string (``"/gpu:0"``, ``"/job:ps/task:0"``), a ``DeviceSpec``, a function
    ``op -> device string`` (a dynamic placement function) or ``None`` (forget outer blocks).
    """
    return get_default_graph().device(device_name_or_function)


def control_dependencies(control_inputs):
    """``with tf.control_dependencies([a, b]):`` ops created inside run after ``a`` and ``b``."""
    return get_default_graph().control_dependencies(control_inputs)


def colocate_with(op, ignore_existing=False):
    """``with tf.colocate_with(v):`` ops created inside share ``v``'s device."""
    return get_default_graph().colocate_with(op, ignore_existing)


def container(container_name):
    """``with tf.container("name"):`` variables created inside live in that resource container."""
    return get_default_graph().container(container_name)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


mul = multiply
sub = subtract
neg = negative
div = truediv

# The ops of an MLP (book: "Training"): tf.exp, tf.argmax, tf.sigmoid, tf.one_hot ...
abs = _math_ops.abs  # noqa: A001 - TF's name
argmax = _math_ops.argmax
argmin = _math_ops.argmin
equal, not_equal = _math_ops.equal, _math_ops.not_equal
less, less_equal = _math_ops.less, _math_ops.less_equal
greater, greater_equal = _math_ops.greater, _math_ops.greater_equal
exp, log, sqrt, rsqrt = _math_ops.exp, _math_ops.log, _math_ops.sqrt, _math_ops.rsqrt
reciprocal = _math_ops.reciprocal
to_float, to_double = _math_ops.to_float, _math_ops.to_double
to_int32, to_int64 = _math_ops.to_int32, _math_ops.to_int64
floor = _math_ops.floor
maximum, minimum = _math_ops.maximum, _math_ops.minimum
squared_difference = _math_ops.squared_difference
floormod = mod = _math_ops.floormod
pow = _math_ops.pow  # noqa: A001 - TF's name
reduce_max = _math_ops.reduce_max
reduce_any = _math_ops.reduce_any
reduce_all = _math_ops.reduce_all
logical_and = _math_ops.logical_and
logical_or = _math_ops.logical_or
reduce_min = _math_ops.reduce_min
where = _math_ops.where
sigmoid, tanh, one_hot = _nn_ops.sigmoid, _nn_ops.tanh, _nn_ops.one_hot
