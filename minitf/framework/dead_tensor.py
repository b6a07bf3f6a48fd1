"""The dead tensor: what flows down the branch of a ``tf.cond`` that is not taken.

Book section: none directly; it is what makes TF1's graph-level ``tf.cond`` run.  A ``Switch``
hands its data to one output and ``DEAD`` to the other.  Every op that receives ``DEAD`` (or
waits on a dead op through a control edge) is dead too: its kernel does not run and its outputs
are ``DEAD``.  A ``Merge`` passes on whichever input is alive.  ``_Send``/``_Recv`` carry
``DEAD`` across devices and tasks, as TF's rendezvous carries its ``is_dead`` bit, so the
branch not taken stays dead wherever it was placed (``runtime/deadness.py`` runs this).
"""

from __future__ import annotations


class _Dead:
    """The one dead value (compare with ``is``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEAD"

    def __reduce__(self):
        return "DEAD"


DEAD = _Dead()

#: the ops whose outputs may be dead: a ``tf.cond``'s ``Switch`` (``RefSwitch`` for a reference)
SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
