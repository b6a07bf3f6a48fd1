"""Writing a file so that readers see the old content or the new one, never half of it.

Book section: "Sharing State Across Sessions Using Resource Containers" (checkpoints, the
``checkpoint`` state file and ``.meta`` graphs a restarted task reads back).  TF writes these
with ``file_io.atomic_write_string_to_file``: into a temporary name next to the target, then a
rename over it, so a crash mid-write leaves the previous file whole.
"""

from __future__ import annotations

import contextlib
import os
import uuid


def atomic_write_string_to_file(
    filename: str, contents: str | bytes, overwrite: bool = True
) -> None:
    """Writes ``contents`` to ``filename`` through a temporary file renamed over it; the
    temporary file is removed if anything fails.  ``overwrite=False``: FileExistsError when
    ``filename`` exists (checked before the rename)."""
    data = contents.encode("utf-8") if isinstance(contents, str) else contents
    tmp = "%s.tmp%s" % (filename, uuid.uuid4().hex)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        if not overwrite and os.path.exists(filename):
            raise FileExistsError(17, "File exists", filename)
        os.replace(tmp, filename)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
