"""Writing a view to a file, one rule for every view (GraphView, TimelineView, ClusterView,
MemoryView): the file's extension picks one of the formats the view offers, and anything else
is refused rather than written in the wrong format."""

import os


class SavesToFile:
    """Mixin: ``save(path)``.  ``save_formats`` maps an extension to the name of the view's
    method that returns the file's text."""

    save_formats = {".svg": "to_svg"}

    def save(self, path):
        """Writes the view in the format ``path``'s extension names; returns ``path``."""
        ext = os.path.splitext(str(path))[1].lower()
        method = self.save_formats.get(ext)
        if method is None:
            raise ValueError(
                "%s.save writes %s files, not %r"
                % (type(self).__name__, ", ".join(sorted(self.save_formats)), ext)
            )
        text = getattr(self, method)()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path
