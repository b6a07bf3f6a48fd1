"""Device strings as Python TensorFlow reads them: ``DeviceSpec`` and the ``tf.device`` merge.

Book sections: "Placing Operations on Devices" (``with tf.device("/gpu:1")``, nested blocks
filling in each other's fields) and "Pinning Operations Across Tasks" (the ``/job:``,
``/replica:`` and ``/task:`` parts of a device string).

A device string names up to five fields, each of which may be left unset (``None``)::

    /job:worker/replica:0/task:1/device:GPU:0
         job       replica  task      type index

This module follows the rules of TF's *Python* parser (spec §1.2-§1.6), the one used while a
graph is built.  The placer reads the same strings again with TF's stricter *C++* rules; those
live in :mod:`minitf.runtime.device_name_utils`.  The two disagree on purpose-built corners
(``/Cpu:0`` is fine here, ``/device:GPU`` is not) and minitf keeps both behaviours.

Parsing is cached per input string: building a graph of thousands of ops parses the same few
strings again and again.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["DeviceSpec", "MergeDevice", "canonical_name", "check_valid", "merge_device"]

# The legacy short forms (``/cpu:0``, ``/GPU:*``, ``gpu``) only exist for these two types.
_LEGACY_TYPES = ("CPU", "GPU")


# -- coercions (the DeviceSpec constructor and setters apply these) ------------------------------


def _str_or_none(value):
    return None if value is None else str(value)


def _int_or_none(value):
    return None if value is None else int(value)


def _type_or_none(value):
    # TF 1.15 upper-cases exactly "cpu" and "gpu"; any other spelling is kept verbatim.
    if value in ("cpu", "gpu"):
        return value.upper()
    return _str_or_none(value)


# -- the parser and the printer, both cached --------------------------------------------------


def _spec_int(text, field, spec):
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            "Invalid %s %r (an integer is expected) while parsing the device "
            "spec: '%s'." % (field, text, spec)
        ) from None


@functools.lru_cache(maxsize=65536)
def _parse(spec):
    """Parse a device string into an immutable ``(job, replica, task, type, index)`` tuple.

    The string is split on ``/`` into pieces and each piece on ``:``; pieces are read left to
    right, in any order, and a later job/replica/task replaces an earlier one.
    """
    job = replica = task = device_type = index = None
    for piece in spec.split("/"):
        parts = piece.split(":")
        n = len(parts)
        head = parts[0]
        if not head:
            # "" (from a leading, doubled or trailing "/") and pieces like ":x" are skipped.
            continue
        if n == 2 and head == "job":
            job = parts[1]  # any text, even "*": no validation
        elif n == 2 and head == "replica":
            replica = _spec_int(parts[1], "replica", spec)
        elif n == 2 and head == "task":
            task = _spec_int(parts[1], "task", spec)
        elif n <= 2 and head.upper() in _LEGACY_TYPES:
            # Legacy form: "cpu", "GPU:1", "Gpu:*" (any case).
            if device_type is not None:
                raise ValueError(
                    "Multiple device types are not allowed while parsing the "
                    "device spec: %s." % spec
                )
            device_type = head.upper()
            if n == 2 and parts[1] != "*":
                index = _spec_int(parts[1], "device index", spec)
        elif n == 3 and head == "device":
            # Full form: "device:TYPE:N" or "device:TYPE:*" (the index is required here).
            if device_type is not None:
                raise ValueError(
                    "Multiple device types are not allowed while parsing the "
                    "device spec: %s." % spec
                )
            device_type = _type_or_none(parts[1])
            if parts[2] != "*":
                index = _spec_int(parts[2], "device index", spec)
        else:
            raise ValueError(
                "Unknown attribute '%s' is encountered while parsing the device "
                "spec: '%s'." % (head, spec)
            )
    return (job, replica, task, device_type, index)


@functools.lru_cache(maxsize=65536)
def _to_string(job, replica, task, device_type, index):
    """Print fields in the one canonical layout; unset fields are left out entirely.

    An index without a device type has nowhere to go and is not printed.
    """
    out = []
    if job is not None:
        out.append("/job:" + job)
    if replica is not None:
        out.append("/replica:%d" % replica)
    if task is not None:
        out.append("/task:%d" % task)
    if device_type is not None:
        out.append("/device:%s:%s" % (device_type, "*" if index is None else index))
    return "".join(out)


def _as_text(spec):
    if isinstance(spec, bytes):
        return spec.decode("utf-8")
    if not isinstance(spec, str):
        raise TypeError("A device string must be a str (or a DeviceSpec), got %r" % (spec,))
    return spec


# -- DeviceSpec ---------------------------------------------------------------------------------


class DeviceSpec:
    """A (partial) device specification: job, replica, task, device type, device index.

    Book section: "Placing Operations on Devices".  Behaves like TF 1.15's ``DeviceSpecV1``:
    fields are mutable, unset fields are ``None``, and ``tf.device`` accepts one in place of a
    string.  ``DeviceSpec(job="ps", task=0, device_type="cpu")`` prints as
    ``/job:ps/task:0/device:CPU:*``.
    """

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index")

    def __init__(
        self,
        job: str | None = None,
        replica: int | None = None,
        task: int | None = None,
        device_type: str | None = None,
        device_index: int | None = None,
    ) -> None:
        self._job = _str_or_none(job)
        self._replica = _int_or_none(replica)
        self._task = _int_or_none(task)
        self._device_type = _type_or_none(device_type)
        self._device_index = _int_or_none(device_index)

    # Mutable properties, with the same coercions as the constructor.
    @property
    def job(self) -> str | None:
        return self._job

    @job.setter
    def job(self, v: str | None) -> None:
        self._job = _str_or_none(v)

    @property
    def replica(self) -> int | None:
        return self._replica

    @replica.setter
    def replica(self, v: int | None) -> None:
        self._replica = _int_or_none(v)

    @property
    def task(self) -> int | None:
        return self._task

    @task.setter
    def task(self, v: int | None) -> None:
        self._task = _int_or_none(v)

    @property
    def device_type(self) -> str | None:
        return self._device_type

    @device_type.setter
    def device_type(self, v: str | None) -> None:
        self._device_type = _type_or_none(v)

    @property
    def device_index(self) -> int | None:
        return self._device_index

    @device_index.setter
    def device_index(self, v: int | None) -> None:
        self._device_index = _int_or_none(v)

    def _fields(self):
        return (self._job, self._replica, self._task, self._device_type, self._device_index)

    def _set_fields(self, fields):
        (self._job, self._replica, self._task, self._device_type, self._device_index) = fields

    @classmethod
    def from_string(cls, spec: str | bytes) -> DeviceSpec:
        """A new spec parsed from ``spec`` (``ValueError`` if malformed)."""
        result = cls()
        result._set_fields(_parse(_as_text(spec)))
        return result

    def parse_from_string(self, spec: str | bytes) -> DeviceSpec:
        """Reset every field, then parse ``spec`` into this object; returns ``self``."""
        self._set_fields(_parse(_as_text(spec)))
        return self

    def to_string(self) -> str:
        """The canonical form, e.g. ``/job:worker/task:1/device:GPU:0``; ``""`` if nothing set."""
        return _to_string(*self._fields())

    def merge_from(self, other: DeviceSpec) -> None:
        """Overwrite each field that is set in ``other``; leave the rest alone.

        Strictly field by field: merging ``/device:GPU:*`` into ``/device:CPU:7`` gives
        ``/device:GPU:7`` (the index survives the change of type).
        """
        self._set_fields(
            tuple(o if o is not None else s for s, o in zip(self._fields(), other._fields()))
        )

    def make_merged_spec(self, other: DeviceSpec) -> DeviceSpec:
        """Like :meth:`merge_from`, but returns a new spec and leaves ``self`` unchanged."""
        result = self.__class__()
        result._set_fields(self._fields())
        result.merge_from(other)
        return result

    def replace(self, **kwargs: str | int | None) -> DeviceSpec:
        """A copy with some fields replaced, e.g. ``spec.replace(task=2)``."""
        fields = dict(
            job=self._job,
            replica=self._replica,
            task=self._task,
            device_type=self._device_type,
            device_index=self._device_index,
        )
        fields.update(kwargs)
        return self.__class__(**fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceSpec):
            return NotImplemented
        return self.to_string() == other.to_string()

    def __hash__(self) -> int:
        # Like TF: hashes the current string, so do not mutate a spec used as a dict key.
        return hash(self.to_string())

    def __repr__(self) -> str:
        names = ("job", "replica", "task", "device_type", "device_index")
        args = ", ".join("%s=%r" % (n, v) for n, v in zip(names, self._fields()) if v is not None)
        return "DeviceSpec(%s)" % args

    def __str__(self) -> str:
        return self.to_string()


# -- module helpers -----------------------------------------------------------------------------


def canonical_name(device: str | bytes | DeviceSpec | None) -> str:
    """``""`` for None, ``to_string()`` for a DeviceSpec, parse-then-print for a string."""
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return _to_string(*_parse(_as_text(device)))


def check_valid(spec: str | bytes) -> None:
    """Raise ``ValueError`` if ``spec`` is not a well-formed device string; else return None."""
    _parse(_as_text(spec))


# -- the merge function behind ``with tf.device(string_or_spec)`` -------------------------------


@functools.lru_cache(maxsize=65536)
def _merge(block_fields, current):
    """Canonical string of the block's fields with every field set in ``current`` on top."""
    cur = _parse(current)
    return _to_string(*[c if c is not None else b for b, c in zip(block_fields, cur)])


class MergeDevice:
    """What a ``tf.device(string_or_spec)`` block applies to each op created inside it.

    Book section: "Placing Operations on Devices".  The block only *fills in* fields the op's
    current device (set by inner blocks) left unset, so inner blocks win field by field::

        with tf.device("/job:worker"):      # outer
            with tf.device("/gpu:1"):       # inner, applied first
                ...                         # op.device == "/job:worker/device:GPU:1"

    A string is parsed once, when the block is entered (a malformed string fails there).  A
    DeviceSpec is kept by reference and read every time an op is created, so mutating it inside
    the block changes later ops (as observed in TF 2.21, spec §11.7).
    """

    __slots__ = ("_spec", "_fields")
    _spec: DeviceSpec | None
    _fields: tuple | None

    def __init__(self, spec: str | bytes | DeviceSpec) -> None:
        if isinstance(spec, DeviceSpec):
            self._spec = spec
            self._fields = None
        else:
            self._spec = None
            self._fields = _parse(_as_text(spec))

    def _block_fields(self):
        return self._fields if self._spec is None else self._spec._fields()

    def merge(self, current: str | None) -> str:
        """The device an op gets from this block, given its ``current`` device string."""
        return _merge(self._fields if self._spec is None else self._spec._fields(), current or "")

    def __call__(self, op: Any) -> str:
        return self.merge(op.device)

    @property
    def is_null_merge(self) -> bool:
        """True when the block's spec prints as ``""``: applying it would change nothing, and
        TF 1.15 skips such blocks entirely."""
        return not _to_string(*self._block_fields())

    def __repr__(self) -> str:
        return "MergeDevice(%r)" % (_to_string(*self._block_fields()),)


def merge_device(spec: str | bytes | DeviceSpec) -> MergeDevice:
    """The merge function for a ``tf.device`` block given a string or a DeviceSpec."""
    return MergeDevice(spec)
