"""``tf.data.Dataset`` as TF 1.15 builds it in a graph (python/data/ops/dataset_ops.py).

Book section: "Loading Data Directly from the Graph": the Data API that replaced the queues and
readers of the chapter (TF >= 1.4; the companion notebook's last section).  A dataset is a
Python object over one graph tensor, the ``variant`` output of its op (``TensorSliceDataset``,
``RepeatDataset``, ``BatchDatasetV2`` ...), plus the structure of its elements: a nest of
tuples and dicts whose leaves are :class:`TensorSpec` (a list is one tensor, not a nest).
Each transformation adds one op over its input's tensor, with the element's flat types and
shapes as attrs and its scalar arguments as constants named as TF names them (``count``,
``batch_size`` ...).  Nothing runs until an iterator (``ops/iterator_ops.py``) asks for
elements; the kernels are in ``kernels/dataset_kernels.py``.
"""

from __future__ import annotations

from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.framework.tensor_spec import TensorSpec
from minitf.lib import deprecation, nest
from minitf.ops import (
    array_ops,
    element_spec,
    func_graph,
    iterator_ops,
    math_ops,
    random_ops,
    script_ops,
)
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op

AUTOTUNE = -1
#: TF 1.15's default static optimizations of a dataset's graph
_OPTIMIZATIONS = [b"map_and_batch_fusion", b"noop_elimination", b"shuffle_and_repeat_fusion"]
_SCALAR = tensor_shape.TensorShape([])

_DATASET_OPS = (
    "TensorDataset",
    "TensorSliceDataset",
    "RangeDataset",
    "TextLineDataset",
    "TFRecordDataset",
    "ZipDataset",
    "ConcatenateDataset",
    "RepeatDataset",
    "BatchDatasetV2",
    "PaddedBatchDatasetV2",
    "ShuffleDataset",
    "SkipDataset",
    "TakeDataset",
    "PrefetchDataset",
    "MapDataset",
    "ParallelMapDataset",
    "FilterDataset",
    "FlatMapDataset",
    "InterleaveDataset",
    "ParallelInterleaveDatasetV2",
    "OptimizeDataset",
    "ModelDataset",
    "ShardDataset",
    "CacheDataset",
    "UnbatchDataset",
)
for _op_type in _DATASET_OPS:
    register_op(_op_type)
    NotDifferentiable(_op_type)
register_op("GeneratorDataset", is_stateful=True)  # it calls a Python generator
NotDifferentiable("GeneratorDataset")


_flat = element_spec.flat
_map_specs = element_spec.map_specs


class DatasetV1(element_spec.HasElementSpec):
    """A dataset of a graph: its ``variant`` tensor and its element structure."""

    #: the class name TF 1.15 prints for it
    _repr_name = "DatasetV1Adapter"

    def __init__(self, variant: Tensor, structure: Any) -> None:
        self._variant_tensor = variant
        self._structure = structure

    def __repr__(self) -> str:
        return "<%s shapes: %s, types: %s>" % (
            self._repr_name,
            _nest_text(self.output_shapes),
            _nest_text(self.output_types),
        )

    def __iter__(self):
        raise RuntimeError(
            "__iter__() is only supported inside of tf.function or when eager execution is enabled."
        )

    # -- sources --------------------------------------------------------------------------------
    @staticmethod
    def from_tensors(tensors) -> DatasetV1:
        """``TensorDataset``: one element, ``tensors`` itself."""
        comps = _components(tensors)
        structure = _map_specs(TensorSpec.from_tensor, comps)
        return _make("TensorDataset", _flat(comps), structure, {"Toutput_types": _types(comps)})

    @staticmethod
    def from_tensor_slices(tensors) -> DatasetV1:
        """``TensorSliceDataset``: one element per row of the components (their first
        dimension, which must agree)."""
        comps = _components(tensors)
        flat = _flat(comps)
        _check_batched(flat)
        first = tensor_shape.Dimension(None)
        for t in flat:
            first = first.merge_with(t.shape[0])
        structure = _map_specs(lambda t: TensorSpec(t.shape[1:], t.dtype), comps)
        return _make("TensorSliceDataset", flat, structure, {"Toutput_types": _types(comps)})

    @staticmethod
    def range(*args) -> DatasetV1:
        """``RangeDataset``: ``range(stop)``, ``range(start, stop)``, ``range(start, stop,
        step)`` as int64 scalars."""
        if not 1 <= len(args) <= 3:
            raise ValueError("Invalid arguments to RangeDataset: %s" % (args,))
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
        inputs = [_int64(v, name) for v, name in ((start, "start"), (stop, "stop"), (step, "step"))]
        return _make("RangeDataset", inputs, TensorSpec([], dtypes.int64))

    @staticmethod
    def from_generator(generator, output_types, output_shapes=None, args=None) -> DatasetV1:
        """The elements a Python generator yields, each converted to ``output_types`` (and
        checked against ``output_shapes``).  As in TF, a ``flat_map`` over a one-element
        dataset (of ``args``, when given) calls ``generator(*args)`` afresh for each pass;
        the generator runs in this process (``ops/script_ops.py``), its elements one per
        ``get_next``."""
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        structure = element_spec.structure_of(output_types, output_shapes)
        token = script_ops.register(_Generator(generator, output_types))

        def flat_map_fn(*values):
            inputs = [] if args is None else list(values)
            attrs = {"token": token, "Targuments": [t.dtype.base_dtype for t in inputs]}
            return _make("GeneratorDataset", inputs, structure, attrs)

        seed = DatasetV1.from_tensors(0 if args is None else tuple(args))
        return seed.flat_map(flat_map_fn)

    @staticmethod
    def zip(datasets) -> DatasetV1:
        """``ZipDataset``: elements side by side, as long as the shortest input."""
        if isinstance(datasets, list) or any(isinstance(x, list) for x in _nests_in(datasets)):
            raise TypeError(
                "The argument to `Dataset.zip()` must be a nested structure of `Dataset` objects. "
                "Nested structures do not support Python lists; please use a tuple instead."
            )
        flat = nest.flatten(datasets, lists=False)
        for d in flat:
            if not isinstance(d, DatasetV1):
                raise TypeError(
                    "The argument to `Dataset.zip()` must be a nested structure of "
                    "`Dataset` objects."
                )
        structure = nest.pack_sequence_as(datasets, [d._structure for d in flat], lists=False)
        return _make("ZipDataset", [d._variant_tensor for d in flat], structure)

    # -- transformations ------------------------------------------------------------------------
    def concatenate(self, dataset: DatasetV1) -> DatasetV1:
        if not element_spec.same_types(self._structure, dataset._structure):
            raise TypeError(
                "Two datasets to concatenate have different types %s and %s"
                % (self.output_types, dataset.output_types)
            )
        structure = _map_specs(lambda s: TensorSpec(s.shape, s.dtype), self._structure)
        for mine, theirs in zip(_flat(structure), _flat(dataset._structure)):
            mine.shape = mine.shape.most_specific_compatible_shape(theirs.shape)
        return _make(
            "ConcatenateDataset", [self._variant_tensor, dataset._variant_tensor], structure
        )

    def repeat(self, count=None) -> DatasetV1:
        """``RepeatDataset``: ``count`` passes over the input (None or -1: forever)."""
        return self._unary("RepeatDataset", [_int64(-1 if count is None else count, "count")])

    def skip(self, count) -> DatasetV1:
        return self._unary("SkipDataset", [_int64(count, "count")])

    def take(self, count) -> DatasetV1:
        return self._unary("TakeDataset", [_int64(count, "count")])

    def shard(self, num_shards, index) -> DatasetV1:
        """``ShardDataset``: every ``num_shards``-th element from the ``index``-th on (one
        worker's share of the input, in data parallelism)."""
        shards, at = _int64(num_shards, "num_shards"), _int64(index, "index")
        return self._unary("ShardDataset", [shards, at], {"require_non_empty": False})

    def cache(self, filename="") -> DatasetV1:
        """``CacheDataset``: the first complete pass is kept (in memory), later passes read
        it instead of the input."""
        name = convert_to_tensor(filename, dtype=dtypes.string, name="filename")
        return self._unary("CacheDataset", [name])

    def unbatch(self) -> DatasetV1:
        """``UnbatchDataset``: each element split along its first dimension (TF 1.15 first
        maps each element through a function that checks every component has one)."""

        def normalize(*args):
            _check_batched(args)
            return args if len(args) > 1 else args[0]

        checked = self.map(normalize)
        structure = _map_specs(lambda s: TensorSpec(s.shape[1:], s.dtype), self._structure)
        d = _make("UnbatchDataset", [checked._variant_tensor], structure)
        return _UnbatchDataset(d._variant_tensor, structure)

    def prefetch(self, buffer_size) -> DatasetV1:
        return self._unary("PrefetchDataset", [_int64(buffer_size, "buffer_size")])

    def batch(self, batch_size, drop_remainder: bool = False) -> DatasetV1:
        """``BatchDatasetV2``: ``batch_size`` consecutive elements stacked (the last batch may
        be smaller unless ``drop_remainder``, so the batch dimension is unknown)."""
        size = _int64(batch_size, "batch_size")
        drop, batch = _drop_remainder(drop_remainder), _batch_dim(size, drop_remainder)
        structure = _map_specs(
            lambda s: TensorSpec(batch.concatenate(s.shape), s.dtype), self._structure
        )
        return _make(
            "BatchDatasetV2",
            [self._variant_tensor, size, drop],
            structure,
            {"parallel_copy": False},
        )

    def padded_batch(
        self, batch_size, padded_shapes, padding_values=None, drop_remainder: bool = False
    ) -> DatasetV1:
        """``PaddedBatchDatasetV2``: a batch whose components are padded (with
        ``padding_values``, by default 0 or ``""``) to ``padded_shapes``; an unknown dimension
        (None or -1) pads to the longest element of the batch."""
        size = _int64(batch_size, "batch_size")
        specs = _flat(self._structure)
        shapes = _flat_like(self._structure, padded_shapes, tensor_shape.as_shape)
        for spec, shape in zip(specs, shapes):
            _check_padded_shape(shape, spec.shape)
        shape_ts = [
            convert_to_tensor([-1 if d is None else d for d in shape.as_list()], dtype=dtypes.int64)
            for shape in shapes
        ]
        values = _flat_like(self._structure, padding_values, lambda v: v)
        value_ts = [
            convert_to_tensor(
                _default_padding(spec.dtype) if v is None else v, spec.dtype, "padding_value"
            )
            for spec, v in zip(specs, values)
        ]
        drop, batch = _drop_remainder(drop_remainder), _batch_dim(size, drop_remainder)
        out = [
            TensorSpec(batch.concatenate(shape), spec.dtype) for spec, shape in zip(specs, shapes)
        ]
        attrs = {"Toutput_types": [s.dtype for s in specs], "N": len(specs), "parallel_copy": False}
        inputs = [self._variant_tensor, size] + shape_ts + value_ts + [drop]
        structure = nest.pack_sequence_as(self._structure, out, lists=False)
        return _make("PaddedBatchDatasetV2", inputs, structure, attrs)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None) -> DatasetV1:
        """``ShuffleDataset``: elements drawn at random from a buffer of ``buffer_size``."""
        size = _int64(buffer_size, "buffer_size")
        seeds = list(_seed_tensors(seed))
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        attrs = {"reshuffle_each_iteration": reshuffle}
        return self._unary("ShuffleDataset", [size] + seeds, attrs)

    def map(self, map_func, num_parallel_calls=None) -> DatasetV1:
        """``MapDataset`` (``ParallelMapDataset`` with ``num_parallel_calls``): ``map_func``
        traced once into a function of the graph, run on every element."""
        fn = _trace(map_func, "Dataset_map", self, _as_tensors)
        inputs, attrs = _function_inputs(self, fn, "f")
        attrs.update(use_inter_op_parallelism=True, preserve_cardinality=False)
        op_type = "MapDataset"
        if num_parallel_calls is not None:
            op_type = "ParallelMapDataset"
            inputs.append(
                convert_to_tensor(num_parallel_calls, dtype=dtypes.int32, name="num_parallel_calls")
            )
            attrs["sloppy"] = False
        structure = _map_specs(TensorSpec.from_tensor, fn.structured_outputs)
        return _make(op_type, inputs, structure, attrs)

    def filter(self, predicate) -> DatasetV1:
        """``FilterDataset``: the elements for which ``predicate`` gives True."""
        fn = _trace(predicate, "Dataset_filter", self, _as_predicate)
        inputs, attrs = _function_inputs(self, fn, "predicate")
        return _make("FilterDataset", inputs, self._structure, attrs)

    def flat_map(self, map_func) -> DatasetV1:
        """``FlatMapDataset``: ``map_func`` makes a dataset of each element; their elements
        follow one another."""
        fn = _trace(map_func, "Dataset_flat_map", self, _as_dataset)
        inputs, attrs = _function_inputs(self, fn, "f")
        return _make("FlatMapDataset", inputs, fn.dataset_structure, attrs)

    def interleave(self, map_func, cycle_length=AUTOTUNE, block_length=1, num_parallel_calls=None):
        """``InterleaveDataset`` (``ParallelInterleaveDatasetV2`` with ``num_parallel_calls``,
        same order): ``map_func`` makes a dataset of each element; ``cycle_length`` of them
        (AUTOTUNE: as many as the machine has cores) are read in turn, ``block_length``
        elements at a time."""
        fn = _trace(map_func, "Dataset_interleave", self, _as_dataset)
        inputs, attrs = _function_inputs(self, fn, "f")
        inputs += [_int64(cycle_length, "cycle_length"), _int64(block_length, "block_length")]
        op_type = "InterleaveDataset"
        if num_parallel_calls is not None:
            op_type = "ParallelInterleaveDatasetV2"
            inputs.append(_int64(num_parallel_calls, "num_parallel_calls"))
            attrs["sloppy"] = False
        return _make(op_type, inputs, fn.dataset_structure, attrs)

    def apply(self, transformation_func):
        return transformation_func(self)

    def _apply_options(self) -> DatasetV1:
        """What TF 1.15 puts in front of an initializable iterator: ``OptimizeDataset`` (the
        default static optimizations, by name) and ``ModelDataset`` (autotuning).  Both hand
        the elements on unchanged here; the one optimization that changes them,
        ``shuffle_and_repeat_fusion``, is the ``RepeatDataset`` kernel's."""
        names = convert_to_tensor(_OPTIMIZATIONS, dtype=dtypes.string, name="optimizations")
        configs = [b"map_vectorization:use_choose_fastest:false"]
        d = self._unary("OptimizeDataset", [names], {"optimization_configs": configs})
        return d._unary("ModelDataset", [], {"algorithm": 0, "cpu_budget": 0})

    # -- iterators (ops/iterator_ops.py) -----------------------------------------------------------
    def make_one_shot_iterator(self) -> iterator_ops.Iterator:
        """The dataset's one-shot iterator (TF 1.15 logs that the method is deprecated)."""
        _deprecated("make_one_shot_iterator")
        return iterator_ops.make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name=None) -> iterator_ops.Iterator:
        """The dataset's initializable iterator (TF 1.15 logs that the method is
        deprecated)."""
        _deprecated("make_initializable_iterator")
        return iterator_ops.make_initializable_iterator(self._apply_options(), shared_name)

    def _unary(self, op_type, args, attrs=None) -> DatasetV1:
        return _make(op_type, [self._variant_tensor] + args, self._structure, attrs)


Dataset = DatasetV1


class _UnbatchDataset(DatasetV1):
    """What ``unbatch`` gives (TF 1.15 prints it under this name, not ``DatasetV1Adapter``)."""

    _repr_name = "_UnbatchDataset"


class _Generator:
    """What a ``GeneratorDataset``'s token names: the generator, and the nest of dtypes its
    values are flattened by (as deep as that nest goes)."""

    def __init__(self, generator, output_types) -> None:
        self.generator = generator
        self.output_types = output_types

    def __call__(self, *args):
        return self.generator(*args)


class _FileDataset(DatasetV1):
    """A dataset of the records of files: TF 1.15 makes a dataset of the file names (their
    tensor ``flat_filenames``) and ``flat_map``s it with ``read_one_file``, a function that
    makes the reading op (``op_type``) of one file."""

    op_type = ""

    def __init__(self, filenames, compression_type=None, buffer_size=None) -> None:
        files = _filenames_dataset(filenames)
        op_type = self.op_type

        def read_one_file(filename):
            kind = "" if compression_type is None else compression_type
            inputs = [
                filename,
                convert_to_tensor(kind, dtype=dtypes.string, name="compression_type"),
                _int64(256 * 1024 if buffer_size is None else buffer_size, "buffer_size"),
            ]
            return _make(op_type, inputs, TensorSpec([], dtypes.string))

        d = files.flat_map(read_one_file)
        super().__init__(d._variant_tensor, d._structure)


class TextLineDataset(_FileDataset):
    """The lines of text files (without their newline), one string per element."""

    op_type = "TextLineDataset"
    _repr_name = "TextLineDatasetV1"


class TFRecordDataset(_FileDataset):
    """The records of TFRecord files, one string per element."""

    op_type = "TFRecordDataset"
    _repr_name = "TFRecordDatasetV1"


def _filenames_dataset(filenames) -> DatasetV1:
    if isinstance(filenames, DatasetV1):
        if filenames.output_types != dtypes.string or filenames.output_shapes.ndims != 0:
            raise TypeError(
                "`filenames` must be a `tf.data.Dataset` of scalar `tf.string` elements."
            )
        return filenames
    names = filenames if isinstance(filenames, Tensor) else convert_to_tensor(filenames)
    if names.dtype.base_dtype != dtypes.string:
        raise TypeError(
            "`filenames` must be a `tf.Tensor` of dtype `tf.string` dtype. Got %r" % names.dtype
        )
    return DatasetV1.from_tensor_slices(array_ops.reshape(names, [-1], name="flat_filenames"))


def _deprecated(method):
    deprecation.warn(
        "DatasetV1." + method,
        "tensorflow.python.data.ops.dataset_ops",
        "Use `for ... in dataset:` to iterate over a dataset. If using `tf.estimator`, return the "
        "`Dataset` object directly from your input function. As a last resort, you can use "
        "`tf.compat.v1.data.%s(dataset)`." % method,
    )


# -- building ops ------------------------------------------------------------------------------


def _make(op_type, inputs, structure, attrs=None) -> DatasetV1:
    a = dict(attrs or {}, **element_spec.attrs_of(structure))
    op = apply_op(op_type, inputs, [(dtypes.variant, _SCALAR)], op_type, a)
    return DatasetV1(op.outputs[0], structure)


def _seed_tensors(seed):
    """The ``seed`` and ``seed2`` int64 scalars of a random dataset (TF's
    ``data/util/random_seed.get_seed``): constants from the graph and op seeds, with ``seed2``
    computed so that the pair is never (0, 0) once a seed was given."""
    s1, s2 = random_ops.get_seed(seed)
    first = _int64(0 if s1 is None else s1, "seed")
    if s2 is None:
        return first, _int64(0, "seed2")
    with name_scope("seed2") as scope:
        second = convert_to_tensor(s2, dtype=dtypes.int64)
        both_zero = math_ops.logical_and(math_ops.equal(first, 0), math_ops.equal(second, 0))
        big = convert_to_tensor(2**31 - 1, dtype=dtypes.int64)
        return first, math_ops.where(both_zero, big, second, name=scope)


def _check_batched(tensors):
    """TF's check that each component has a dimension to slice or unbatch along."""
    for t in tensors:
        if t.shape.ndims == 0:
            raise ValueError("Value %s has insufficient rank for batching." % t)


def _batch_dim(size, drop_remainder):
    """A batch's first dimension as a shape: known only when only whole batches of a constant
    ``size`` are kept."""
    static = array_ops._static_value(size) if drop_remainder is True else None
    return tensor_shape.TensorShape([None if static is None else int(static)])


def _drop_remainder(drop_remainder):
    return convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder")


def _int64(value, name) -> Tensor:
    return convert_to_tensor(value, dtype=dtypes.int64, name=name)


def _components(tensors):
    """The element's components as tensors (TF's ``normalize_element``)."""
    if tensors is None or (isinstance(tensors, (tuple, dict)) and not _flat(tensors)):
        raise ValueError("Attempt to convert a value (None) with an unsupported type.")
    with name_scope("normalize_element"):
        flat = [
            t if isinstance(t, Tensor) else convert_to_tensor(t, name="component_%d" % i)
            for i, t in enumerate(_flat(tensors))
        ]
    return nest.pack_sequence_as(tensors, flat, lists=False)


def _flat_like(structure, values, convert):
    """``values`` (one per component of ``structure``, in its nest; None: None for each) as a
    flat list; a single component takes ``values`` whole (a list of dims is one shape)."""
    n = len(_flat(structure))
    if values is None:
        return [None] * n
    if not nest.is_sequence(structure, lists=False):
        return [convert(values)]
    return [convert(v) for v in nest.flatten(values, lists=False)]


def _check_padded_shape(padded, shape):
    known = shape.ndims is not None
    if known and (
        padded.ndims != shape.ndims
        or any(
            p is not None and d is not None and p < d
            for p, d in zip(padded.as_list(), shape.as_list())
        )
    ):
        raise ValueError(
            "The padded shape %s is not compatible with the corresponding input component shape %s."
            % (padded, shape)
        )


def _default_padding(dtype):
    return "" if dtype == dtypes.string else 0


def _nests_in(x):
    """``x`` and the nests inside it."""
    if isinstance(x, dict):
        return [x] + [n for v in x.values() for n in _nests_in(v)]
    if isinstance(x, (tuple, list)):
        return [x] + [n for v in x for n in _nests_in(v)]
    return []


def _types(comps):
    return [t.dtype.base_dtype for t in _flat(comps)]


def _nest_text(x) -> str:
    if isinstance(x, tuple):
        inner = ", ".join(_nest_text(v) for v in x)
        return "(%s%s)" % (inner, "," if len(x) == 1 else "")
    if isinstance(x, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _nest_text(x[k])) for k in sorted(x))
    return repr(x) if isinstance(x, dtypes.DType) else str(x)


# -- functions ---------------------------------------------------------------------------------


def _trace(fn, what, dataset, convert):
    name = "__inference_%s_%s" % (what, getattr(fn, "__name__", "fn"))
    graph = dataset._variant_tensor.graph
    g = func_graph.trace(fn, name, dataset._structure, convert, graph)
    if isinstance(g.structured_outputs, _DatasetResult):
        inner = g.structured_outputs.dataset
        g.dataset_structure, g.outputs = inner._structure, [inner._variant_tensor]
    return g


def _function_inputs(dataset, fn, attr):
    """The op's inputs (the dataset, then the captured tensors) and its function attrs."""
    captured = fn.captured_inputs
    attrs = {attr: fn, "Targuments": [t.dtype.base_dtype for t in captured]}
    return [dataset._variant_tensor] + captured, attrs


def _as_tensors(result):
    """A map function's result as a nest of tensors (a list becomes one tensor)."""
    if result is None:
        raise TypeError("Unsupported return value from function passed to Dataset.map(): None.")
    return _map_specs(lambda x: x if isinstance(x, Tensor) else convert_to_tensor(x), result)


def _as_predicate(result):
    t = convert_to_tensor(result) if not isinstance(result, Tensor) else result
    if t.dtype.base_dtype != dtypes.bool or t.shape.ndims != 0:
        raise ValueError(
            "`predicate` return type must be convertible to a scalar boolean tensor. Was %r."
            % TensorSpec.from_tensor(t)
        )
    return t


def _as_dataset(result):
    """A flat_map or interleave function's result: a dataset (its variant tensor is the
    function's one output; its structure that of the elements it makes)."""
    if not isinstance(result, DatasetV1):
        got = TensorSpec if isinstance(result, Tensor) else type(result)
        raise TypeError("`map_func` must return a `Dataset` object. Got %s" % got)
    return _DatasetResult(result)


class _DatasetResult:
    """A traced function's dataset: one flat output, the dataset's tensor."""

    def __init__(self, dataset):
        self.dataset = dataset
