"""Tests for ``tf.errors``: the OpError classes, their canonical codes, the code <-> class
mappings, the message/op/node_def/error_code properties and pickling (spec §8).  Book section:
every section (the chapter's examples fail with ``InvalidArgumentError``,
``FailedPreconditionError`` ...)."""

import pickle

import pytest

import minitf as tf
from minitf import errors

CLASSES = [
    ("CancelledError", "CANCELLED", 1),
    ("UnknownError", "UNKNOWN", 2),
    ("InvalidArgumentError", "INVALID_ARGUMENT", 3),
    ("DeadlineExceededError", "DEADLINE_EXCEEDED", 4),
    ("NotFoundError", "NOT_FOUND", 5),
    ("AlreadyExistsError", "ALREADY_EXISTS", 6),
    ("PermissionDeniedError", "PERMISSION_DENIED", 7),
    ("ResourceExhaustedError", "RESOURCE_EXHAUSTED", 8),
    ("FailedPreconditionError", "FAILED_PRECONDITION", 9),
    ("AbortedError", "ABORTED", 10),
    ("OutOfRangeError", "OUT_OF_RANGE", 11),
    ("UnimplementedError", "UNIMPLEMENTED", 12),
    ("InternalError", "INTERNAL", 13),
    ("UnavailableError", "UNAVAILABLE", 14),
    ("DataLossError", "DATA_LOSS", 15),
    ("UnauthenticatedError", "UNAUTHENTICATED", 16),
]


def test_ok_constant():
    """§8: tf.errors.OK is 0."""
    assert tf.errors.OK == 0


@pytest.mark.parametrize("cls_name, const_name, code", CLASSES)
def test_code_constants(cls_name, const_name, code):
    """§8: each canonical code is exported as a constant with TF's number."""
    assert getattr(tf.errors, const_name) == code


@pytest.mark.parametrize("cls_name, const_name, code", CLASSES)
def test_class_code_and_base(cls_name, const_name, code):
    """§8: every class derives from OpError (an Exception) and carries its code."""
    cls = getattr(tf.errors, cls_name)
    assert issubclass(cls, tf.errors.OpError)
    assert issubclass(cls, Exception)
    e = cls(None, None, "boom")
    assert isinstance(e, tf.errors.OpError)
    assert e.error_code == code
    assert e.message == "boom"
    assert e.op is None
    assert e.node_def is None
    assert str(e) == "boom"
    assert type(e).__name__ == cls_name


@pytest.mark.parametrize("cls_name, const_name, code", CLASSES)
def test_code_class_mappings(cls_name, const_name, code):
    """§8: exception_type_from_error_code and error_code_from_exception_type are inverse."""
    cls = getattr(tf.errors, cls_name)
    assert tf.errors.exception_type_from_error_code(code) is cls
    assert tf.errors.error_code_from_exception_type(cls) == code


def test_unknown_code_is_key_error():
    """exception_type_from_error_code of an unknown code raises KeyError (as TF)."""
    with pytest.raises(KeyError):
        tf.errors.exception_type_from_error_code(99)
    with pytest.raises(KeyError):
        tf.errors.exception_type_from_error_code(0)  # OK has no exception class


def test_all_classes_are_distinct():
    """Sixteen distinct classes, one per non-OK code."""
    classes = {getattr(tf.errors, n) for n, _, _ in CLASSES}
    assert len(classes) == 16
    assert tf.errors.OpError not in classes


@pytest.mark.parametrize("cls_name, const_name, code", CLASSES)
def test_catchable_as_op_error(cls_name, const_name, code):
    """`except tf.errors.OpError` catches every specific error."""
    cls = getattr(tf.errors, cls_name)
    with pytest.raises(tf.errors.OpError) as e:
        raise cls(None, None, "x")
    assert type(e.value) is cls


def test_op_error_base_class():
    """OpError(node_def, op, message, error_code) keeps all four."""
    e = tf.errors.OpError("nd", None, "msg", tf.errors.INTERNAL)
    assert e.node_def == "nd"
    assert e.op is None
    assert e.message == "msg"
    assert e.error_code == tf.errors.INTERNAL
    assert str(e) == "msg"


def test_unknown_error_takes_an_error_code():
    """TF's UnknownError(node_def, op, message, error_code=UNKNOWN) keeps a given code (used
    for codes Python does not know)."""
    assert tf.errors.UnknownError(None, None, "m").error_code == tf.errors.UNKNOWN
    assert tf.errors.UnknownError(None, None, "m", 42).error_code == 42


def test_properties_are_read_only():
    """message, op, node_def and error_code are properties without setters."""
    e = tf.errors.InvalidArgumentError(None, None, "m")
    for name in ("message", "op", "node_def", "error_code"):
        with pytest.raises(AttributeError):
            setattr(e, name, "x")


@pytest.mark.parametrize("cls_name, const_name, code", CLASSES)
def test_pickle_round_trip(cls_name, const_name, code):
    """Errors survive pickling with their class, message and code."""
    cls = getattr(tf.errors, cls_name)
    e = cls(None, None, "it broke: [[node x]]")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert back.message == "it broke: [[node x]]"
    assert back.error_code == code
    assert back.op is None and back.node_def is None
    assert str(back) == str(e)


def test_pickle_round_trip_op_error_keeps_code():
    """A plain OpError keeps its error code through pickling."""
    e = tf.errors.OpError(None, None, "m", tf.errors.INTERNAL)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is tf.errors.OpError
    assert back.message == "m"
    assert back.error_code == tf.errors.INTERNAL


def test_pickle_round_trip_unknown_error_keeps_code():
    """UnknownError with a non-standard code keeps it through pickling."""
    e = tf.errors.UnknownError(None, None, "m", 42)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is tf.errors.UnknownError
    assert back.error_code == 42


def test_pickle_round_trip_with_node_def():
    """node_def (any picklable value) survives pickling."""
    e = tf.errors.NotFoundError({"name": "v"}, None, "gone")
    back = pickle.loads(pickle.dumps(e))
    assert back.node_def == {"name": "v"}
    assert back.message == "gone"


def test_module_is_the_same_object():
    """tf.errors is minitf.framework.errors."""
    assert tf.errors is errors


def test_runtime_error_carries_op_and_node_def():
    """§8: errors raised by sess.run carry the failing Operation and its node_def."""
    v = tf.Variable(1.0, name="v")
    y = v * 2
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            sess.run(y)
    assert e.value.error_code == tf.errors.FAILED_PRECONDITION
    assert e.value.op is tf.get_default_graph().get_operation_by_name("v/read")
    assert e.value.node_def is not None
    assert e.value.node_def.name == "v/read"
    assert e.value.node_def.op == "Identity"


def test_errors_raised_by_session_are_op_errors():
    """Placement errors are InvalidArgumentError instances of OpError with code 3."""
    with tf.device("/job:nowhere"):
        c = tf.identity(tf.constant(1.0), name="c")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.OpError) as e:
            sess.run(c)
    assert isinstance(e.value, tf.errors.InvalidArgumentError)
    assert e.value.error_code == 3
    assert e.value.op.name == "c"
