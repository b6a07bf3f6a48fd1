"""TensorFlow's error classes (``tf.errors``), with TF's canonical codes.

Book sections: every section. The chapter's examples fail in well-known ways (``Cannot assign a
device for operation ...``, ``Attempting to use uninitialized value ...``); minitf raises the same
class with the same text so a learner can search for it.

Every class derives from :class:`OpError` and carries ``node_def``, ``op`` (the Python
Operation or ``None``), ``message`` and ``error_code``.  ``str(e)`` is the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minitf.framework.graph import NodeDef, Operation

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base class of every error an op or a session run can raise.

    ``derived`` (minitf, TF's "derived status"): True when this error only follows from
    another failure (a step cancelled because a partition on another task failed, a tensor that
    never came); a master reports a step's root cause rather than the errors it caused.
    """

    derived = False

    def __init__(
        self,
        node_def: NodeDef | None,
        op: Operation | None,
        message: str,
        error_code: int = UNKNOWN,
    ) -> None:
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self) -> Operation | None:
        return self._op

    @property
    def node_def(self) -> NodeDef | None:
        return self._node_def

    @property
    def error_code(self) -> int:
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self) -> tuple:
        # Keeps errors picklable across process boundaries, code included.
        return (type(self), (self._node_def, self._op, self._message, self._error_code))


def _make(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(
        self: OpError, node_def: NodeDef | None, op: Operation | None, message: str, *args: int
    ) -> None:
        # Only UnknownError keeps a code given to it (TF's signature); the others are fixed.
        given = args[0] if args and code == UNKNOWN else code
        OpError.__init__(self, node_def, op, message, given)

    cls = type(name, (OpError,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})
    return cls


CancelledError = _make("CancelledError", CANCELLED, "An operation or step was cancelled.")
UnknownError = _make("UnknownError", UNKNOWN, "Unknown error.")
InvalidArgumentError = _make(
    "InvalidArgumentError",
    INVALID_ARGUMENT,
    "An op received an invalid argument (bad device, shape, feed ...).",
)
DeadlineExceededError = _make(
    "DeadlineExceededError",
    DEADLINE_EXCEEDED,
    "A deadline expired before the operation could complete.",
)
NotFoundError = _make("NotFoundError", NOT_FOUND, "A requested entity was not found.")
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS, "An entity already exists.")
PermissionDeniedError = _make(
    "PermissionDeniedError", PERMISSION_DENIED, "The caller may not run the operation."
)
ResourceExhaustedError = _make(
    "ResourceExhaustedError",
    RESOURCE_EXHAUSTED,
    "Some resource (memory, most often) has been exhausted.",
)
FailedPreconditionError = _make(
    "FailedPreconditionError",
    FAILED_PRECONDITION,
    "The system is not in a state to run the operation (e.g. an uninitialized variable).",
)
AbortedError = _make("AbortedError", ABORTED, "The operation was aborted.")
OutOfRangeError = _make(
    "OutOfRangeError",
    OUT_OF_RANGE,
    "An operation iterated past the valid input range (closed queue).",
)
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED, "The operation is not implemented.")
InternalError = _make("InternalError", INTERNAL, "An internal invariant was broken.")
UnavailableError = _make("UnavailableError", UNAVAILABLE, "The runtime is unavailable.")
DataLossError = _make("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")
UnauthenticatedError = _make(
    "UnauthenticatedError", UNAUTHENTICATED, "The request lacks valid authentication credentials."
)

_CODE_TO_CLASS = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}
_CLASS_TO_CODE = {cls: code for code, cls in _CODE_TO_CLASS.items()}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The OpError subclass for a canonical code (``KeyError`` for an unknown code, as TF)."""
    return _CODE_TO_CLASS[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """The canonical code of an OpError subclass (``UNKNOWN`` for anything else)."""
    return _CLASS_TO_CODE.get(cls, UNKNOWN)


def as_op_error(exc: BaseException) -> OpError:
    """``exc`` itself when it is an OpError; any other exception (one no kernel or service
    turned into a TF error: a bug of minitf's) as InternalError ``"<Type>: <text>"``."""
    if isinstance(exc, OpError):
        return exc
    return InternalError(None, None, "%s: %s" % (type(exc).__name__, exc))
