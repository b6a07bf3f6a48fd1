"""Device names as TensorFlow's C++ runtime reads them (``DeviceNameUtils``), for the placer.

Book sections: "Placing Operations on Devices" (how a requested ``op.device`` is matched against
the devices a session really has) and "Pinning Operations Across Tasks" (the same matching over
``/job:ps/task:0``-style names of a cluster).

The graph stores whatever string ``tf.device`` produced (Python rules, see
:mod:`minitf.framework.device_spec`).  When a session places the graph, TF re-reads those
strings with a stricter C++ parser, and that is what this module reproduces (spec §1.4):

* components are ``/job:NAME``, ``/replica:N``, ``/task:N``, ``/device:TYPE[:N]`` and the legacy
  ``/cpu:N``, ``/CPU:N``, ``/gpu:N``, ``/GPU:N``, in any order, each starting with ``/``;
* NAME and TYPE start with an ASCII letter, then letters, digits or ``_``; N is ASCII digits;
* ``*`` in any field means "unset";
* anything else (``/Cpu:0``, ``/job:123``, ``/task:-1``, a trailing ``/``) is a parse failure.

A device type is compared case-sensitively: ``/device:gpu:0`` does not match a ``GPU`` device.
"""

import functools
import re

from minitf.framework import errors

__all__ = [
    "ParsedName",
    "parse_full_name",
    "full_name",
    "merge_dev_names",
    "is_specification",
    "is_complete_specification",
    "matches",
    "legacy_name",
]

_FIELDS = ("job", "replica", "task", "type", "id")


class ParsedName:
    """The five fields of a C++ device name; ``None`` means unset (C++'s ``has_x == false``)."""

    __slots__ = _FIELDS

    def __init__(self, job=None, replica=None, task=None, type=None, id=None):  # noqa: A002
        self.job, self.replica, self.task, self.type, self.id = job, replica, task, type, id

    def _tuple(self):
        return (self.job, self.replica, self.task, self.type, self.id)

    def to_string(self):
        """Canonical ``/job:J/replica:R/task:T/device:TYPE:ID`` with unset parts left out.

        A type without an id prints as ``/device:TYPE:*``; an id without a type is not printed.
        """
        out = []
        if self.job is not None:
            out.append("/job:" + self.job)
        if self.replica is not None:
            out.append("/replica:%d" % self.replica)
        if self.task is not None:
            out.append("/task:%d" % self.task)
        if self.type is not None:
            out.append("/device:%s:%s" % (self.type, "*" if self.id is None else self.id))
        return "".join(out)

    def is_fully_specified(self):
        """True when all five fields are set, as in a real device's name."""
        return None not in self._tuple()

    def copy(self):
        return ParsedName(*self._tuple())

    def __eq__(self, other):
        if not isinstance(other, ParsedName):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None  # mutable

    def __repr__(self):
        args = ", ".join("%s=%r" % (n, v) for n, v in zip(_FIELDS, self._tuple()) if v is not None)
        return "ParsedName(%s)" % args

    def __str__(self):
        return self.to_string()


# One component of a name, matched at the current position.  Only one named group matches.
_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_NUM = r"[0-9]+"
_COMPONENT = re.compile(
    r"/job:(?:\*|(?P<job>%(name)s))"
    r"|/replica:(?:\*|(?P<replica>%(num)s))"
    r"|/task:(?:\*|(?P<task>%(num)s))"
    r"|/device:(?P<device>\*|%(name)s)(?::(?:\*|(?P<device_id>%(num)s)))?"
    r"|/(?P<legacy>cpu|CPU|gpu|GPU):(?:\*|(?P<legacy_id>%(num)s))" % {"name": _NAME, "num": _NUM}
)


@functools.lru_cache(maxsize=65536)
def _parse(name):
    """``(job, replica, task, type, id)`` for ``name``, or None when it is malformed."""
    job = replica = task = dtype = did = None
    if name == "/":
        return (None, None, None, None, None)
    pos, end = 0, len(name)
    while pos < end:
        m = _COMPONENT.match(name, pos)
        if m is None:
            return None
        pos = m.end()
        text = m.group(0)
        if text.startswith("/job:"):
            job = m.group("job")  # None again for "/job:*"
        elif text.startswith("/replica:"):
            replica = _int(m.group("replica"))
        elif text.startswith("/task:"):
            task = _int(m.group("task"))
        elif text.startswith("/device:"):
            dtype = None if m.group("device") == "*" else m.group("device")
            did = _int(m.group("device_id"))  # "/device:GPU" (no id) unsets the id
        else:  # /cpu:N /CPU:N /gpu:N /GPU:N
            dtype = m.group("legacy").upper()
            did = _int(m.group("legacy_id"))
    return (job, replica, task, dtype, did)


def _int(digits):
    return None if digits is None else int(digits)


def parse_full_name(name):
    """Parse ``name`` with the C++ rules; a new :class:`ParsedName`, or None if malformed.

    ``""`` and ``"/"`` give an all-unset name.  Results are cached per string internally as
    immutable tuples; every call returns a fresh ParsedName, so callers may mutate it freely.
    """
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    if not isinstance(name, str):
        raise TypeError("A device name must be a str, got %r" % (name,))
    fields = _parse(name)
    return None if fields is None else ParsedName(*fields)


def full_name(job, replica, task, type, id):  # noqa: A002
    """The name of a real device: ``/job:localhost/replica:0/task:0/device:CPU:0``."""
    return "/job:%s/replica:%d/task:%d/device:%s:%d" % (job, replica, task, type, id)


def task_name(job, task, replica=0):
    """The name of a task: ``/job:worker/replica:0/task:1`` (what TF prefixes errors with)."""
    return "/job:%s/replica:%d/task:%d" % (job, replica, task)


def task_name_of(device_name):
    """The task a full device name belongs to (``/job:ps/replica:0/task:0`` for
    ``/job:ps/replica:0/task:0/device:CPU:0``); InvalidArgumentError if it names none."""
    p = parse_full_name(device_name)
    if p is None or p.job is None or p.task is None:
        raise errors.InvalidArgumentError(None, None, "Bad device name %s" % str(device_name)[:200])
    return task_name(p.job, p.task, p.replica or 0)


def merge_dev_names(target, other, allow_soft_placement=False):
    """Merge ``other`` into ``target`` in place (the placer merging a colocation group).

    Each field set in ``other`` is copied into ``target``; if ``target`` already has a different
    value the merge fails with ``InvalidArgumentError``.  With ``allow_soft_placement`` a type
    conflict instead unsets both type and id (and stops), and an id conflict unsets the id.
    As in TF, fields merged before a conflict stay merged, and the message shows ``target`` as
    it was at the conflict.
    """

    def conflict(what):
        return errors.InvalidArgumentError(
            None,
            None,
            "Cannot merge devices with incompatible %s: '%s' and '%s'"
            % (what, target.to_string(), other.to_string()),
        )

    for field, what in (("job", "jobs"), ("replica", "replicas"), ("task", "tasks")):
        value = getattr(other, field)
        if value is not None:
            mine = getattr(target, field)
            if mine is not None and mine != value:
                raise conflict(what)
            setattr(target, field, value)
    if other.type is not None:
        if target.type is not None and target.type != other.type:
            if not allow_soft_placement:
                raise conflict("types")
            target.type = None
            target.id = None
            return
        target.type = other.type
    if other.id is not None:
        if target.id is not None and target.id != other.id:
            if not allow_soft_placement:
                raise conflict("ids")
            target.id = None
            return
        target.id = other.id


def is_specification(less_specific, more_specific):
    """True when every field set in ``less_specific`` is set to the same value in the other."""
    for mine, theirs in zip(less_specific._tuple(), more_specific._tuple()):
        if mine is not None and mine != theirs:
            return False
    return True


def is_complete_specification(pattern, full):
    """True when every field set in ``pattern`` equals ``full``'s; ``full`` must be complete
    (``ValueError`` otherwise, where TF would abort on a failed CHECK)."""
    if not full.is_fully_specified():
        raise ValueError("Not a complete device name: '%s'" % full.to_string())
    return is_specification(pattern, full)


def matches(pattern, device_full_name):
    """Does the device called ``device_full_name`` satisfy ``pattern``?

    ``pattern`` is a ParsedName or a string (parsed here; ``ValueError`` if malformed).  A device
    name that does not parse matches nothing.
    """
    if not isinstance(pattern, ParsedName):
        parsed = parse_full_name(pattern)
        if parsed is None:
            raise ValueError("Malformed device name: '%s'" % (pattern,))
        pattern = parsed
    fields = _parse(device_full_name)
    return fields is not None and is_specification(pattern, ParsedName(*fields))


def legacy_name(name):
    """The lower-case alias a device is also registered under:
    ``/job:J/replica:R/task:T/device:CPU:N`` → ``/job:J/replica:R/task:T/cpu:N``."""
    p = parse_full_name(name)
    if p is None or not p.is_fully_specified():
        raise ValueError("Not a complete device name: '%s'" % (name,))
    return "/job:%s/replica:%d/task:%d/%s:%d" % (p.job, p.replica, p.task, p.type.lower(), p.id)
