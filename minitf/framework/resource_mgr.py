"""Per-device resource managers: where variables (and later queues) keep their state.

Book section: "Sharing State Across Sessions Using Resource Containers".  Every device has a
resource manager mapping ``(container, name)`` to a resource; a variable's storage is found
there by its container (``tf.container`` or, by default, the device's job name) and its name.
"""

import re
import threading
import weakref

from minitf.framework import errors

_CONTAINER_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9.\-/]*\Z")


def check_container_name(name: str) -> None:
    """TF's ``IsValidContainerName`` (``ContainerInfo::Init``, resource_mgr.cc): a non-empty
    container must match ``[A-Za-z0-9.][A-Za-z0-9.\\-/]*``, so the book's
    ``tf.container("my_problem_1")`` fails at the kernel's first run on TF 1.15 (underscores are
    not allowed; use ``my-problem-1``).  Used by ref ``VariableV2``, every queue and every reader
    kernel.  Book section: "Sharing State Across Sessions Using Resource Containers"."""
    if name and not _CONTAINER_NAME.match(name):
        raise errors.InvalidArgumentError(
            None, None, "container contains invalid characters: %s" % name
        )


class VariableRef:
    """The storage of one TF1 reference variable: a numpy value, or None until initialised."""

    __slots__ = ("name", "dtype", "shape", "value", "lock", "allocator", "_token", "__weakref__")

    def __init__(self, name, dtype, shape=None, allocator=None):
        self.name = name
        self.dtype = dtype  # numpy dtype
        self.shape = shape  # declared shape (a tuple) when fully defined, else None
        self.value = None
        self.lock = threading.Lock()
        self.allocator = allocator  # GPU variables count against their card's memory
        self._token = None

    def set(self, value):
        """Stores ``value`` (caller holds ``lock``), accounting for it on the device."""
        if self.allocator is not None:
            token = self.allocator.allocate(
                int(getattr(value, "nbytes", 0)),
                self.name,
                getattr(value, "shape", ()),
                self.dtype.__name__,
            )
            if self._token is None:
                self._token = [None]  # freed when the variable's storage goes away
                weakref.finalize(self, _free_token, self.allocator, self._token)
            elif self._token[0] is not None:
                self.allocator.free(self._token[0])
            self._token[0] = token
        self.value = value

    def read(self):
        """The current value; FailedPreconditionError when the variable was never assigned."""
        v = self.value
        if v is None:
            raise errors.FailedPreconditionError(
                None, None, "Attempting to use uninitialized value %s" % self.name
            )
        return v

    def __repr__(self):
        return "<VariableRef %s %s>" % (
            self.name,
            "uninitialized" if self.value is None else "initialized",
        )


def _free_token(allocator, holder):
    if holder[0] is not None:
        allocator.free(holder[0])
        holder[0] = None


class ResourceMgr:
    """``(container, name) -> resource`` for one device, safe to use from several threads."""

    def __init__(self, default_container):
        self.default_container = default_container
        self._containers = {}
        self._lock = threading.Lock()

    def lookup_or_create(self, container, name, creator):
        container = container or self.default_container
        with self._lock:
            c = self._containers.setdefault(container, {})
            res = c.get(name)
            if res is None:
                res = c[name] = creator()
            return res

    def lookup(self, container, name):
        container = container or self.default_container
        with self._lock:
            if container not in self._containers:
                raise errors.NotFoundError(
                    None,
                    None,
                    "Container %s does not exist. (Could not find resource: %s/%s)"
                    % (container, container, name),
                )
            try:
                return self._containers[container][name]
            except KeyError:
                raise errors.NotFoundError(
                    None, None, "Resource %s/%s does not exist." % (container, name)
                ) from None

    def cleanup(self, container):
        """Drops every resource of ``container`` (what ``Session.reset`` does per device)."""
        with self._lock:
            self._containers.pop(container, None)

    def containers(self):
        with self._lock:
            return {c: sorted(r) for c, r in self._containers.items()}
